import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { DID_SEGMENT } from '../../commands/agent.ts';
import { getAgent, readAgents, registerAgent, resolveDid, revokeAgent, revokeAgentKey, rotateAgentKey, signAsAgent } from '../usecases/agents.ts';
import { ApiError, forbidden } from './kernel/errors.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';
import { Timestamp } from './kernel/schemas.ts';
import type { ApiKeyAuth } from './kernel/auth.ts';

// Agent identities (spec 4.9): registration and keys (also under the
// deprecated /v1/orgs/:orgId/agents), revocation, signing, reads and the
// did:web documents. The logic is src/usecases/agents.ts.

const Handle = z.string().min(1).max(64);
const KEY_STATUS = "The key's state: `active` signs; `retired` (by a rotation) still verifies earlier signatures but cannot sign; `revoked` does neither.";
const AgentKey = z.object({ kid: z.string(), ordinal: z.number().int(), pubkey: z.string(), status: z.enum(['active', 'retired', 'revoked']).describe(KEY_STATUS), created_at: Timestamp, retired_at: Timestamp.nullable(), revoked_at: Timestamp.nullable() });
export const Agent = z
  .object({ agent_id: z.string(), agent_did: z.string(), principal_ref: z.string(), display_name: z.string().nullable(), status: z.enum(['active', 'revoked']).describe('`active`, or `revoked` (for good: its keys are revoked and it can no longer sign).'), created_at: Timestamp, revoked_at: Timestamp.nullable(), keys: z.array(AgentKey).describe("The agent's keys, in creation order.") })
  .meta({ id: 'Agent' });

const Registered = z.object({ agent_did: z.string(), kid: z.string(), pubkey: z.string(), status: z.literal('active').describe('The new key is `active`: it signs from now.') });
const Rotated = z.object({ agent_did: z.string(), kid: z.string(), pubkey: z.string(), retired_kid: z.string(), status: z.literal('active').describe('The new key is `active`; the previous one is retired.') });
const KeyRevoked = z.object({ kid: z.string(), status: z.literal('revoked').describe('The key is `revoked`: it neither signs nor verifies.'), revoked_at: Timestamp });
const AgentRevokedBody = z.object({
  did: z.string(),
  status: z.literal('revoked').describe('The agent is `revoked`, for good.'),
  revoked_at: Timestamp,
  revoked_kids: z.array(z.string()),
  limits: z.object({ stops: z.array(z.string()), does_not_stop: z.string(), issue: z.string() }),
});

function checkOrgPath(orgId: string, auth: ApiKeyAuth) {
  if (!DID_SEGMENT.test(orgId)) throw new ApiError(400, 'invalid_did_segment', 'orgId holds characters a did:web cannot hold');
  if (orgId !== auth.orgId) throw forbidden('orgId is not the authenticated organization');
}

const rejectionsOf = [
  [400, 'invalid_body'],
  [400, 'invalid_did_segment'],
  [401, 'unauthorized'],
  [403, 'forbidden'],
] as const;

/** Registration, rotation and key revocation, under /v1/agents and (deprecated) /v1/orgs/:orgId/agents. */
function agentKeyRoutes(app: FastifyInstance, deps: AppDeps, scoped: boolean): void {
  const RegisterBody = z.object({ agent_id: Handle, principal_ref: z.string().trim().min(1).max(200), display_name: z.string().trim().min(1).max(200).nullable().optional() });
  const base = scoped ? '/v1/orgs/:orgId/agents' : '/v1/agents';
  const op = (name: string) => (scoped ? `${name}OrgScoped` : name);
  // The path's organization is checked with the credential, before the body is read.
  const authorize = ({ auth, params }: { auth: ApiKeyAuth; params: Readonly<Record<string, string>> }) => {
    if (scoped) checkOrgPath(params.orgId ?? '', auth);
  };

  defineRoute(app, deps, {
    method: 'POST',
    url: base,
    operationId: op('registerAgent'),
    summary: 'Register an agent: an Ed25519 key is generated, the private key goes to the vault',
    tags: ['agents'],
    auth: 'api_key',
    scope: 'agents:write',
    deprecated: scoped,
    params: scoped ? z.object({ orgId: z.string().min(1).max(200) }) : z.object({}),
    body: RegisterBody,
    responses: { 201: Registered },
    errors: [...rejectionsOf, [409, 'agent_exists']],
    idempotent: true,
    authorize,
    async handler({ auth, body, deps, run }) {
      return { status: 201, body: await registerAgent(deps, run, auth, body) };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: `${base}/:agentId/keys/rotate`,
    operationId: op('rotateAgentKey'),
    summary: 'Rotate: the active key is retired (still verifies, cannot sign), a new key is active',
    tags: ['agents'],
    auth: 'api_key',
    scope: 'agents:write',
    deprecated: scoped,
    params: scoped ? z.object({ orgId: z.string().min(1).max(200), agentId: Handle }) : z.object({ agentId: Handle }),
    responses: { 201: Rotated },
    errors: [...rejectionsOf, [404, 'agent_not_found'], [409, 'no_active_key']],
    idempotent: true,
    authorize,
    async handler({ auth, params, deps, run }) {
      return { status: 201, body: await rotateAgentKey(deps, run, auth, (params as { agentId: string }).agentId) };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: `${base}/:agentId/keys/:kid/revoke`,
    operationId: op('revokeAgentKey'),
    summary: 'Revoke one key (kid with # sent as %23); an active or retired key can be revoked',
    tags: ['agents'],
    auth: 'api_key',
    scope: 'agents:write',
    deprecated: scoped,
    params: scoped ? z.object({ orgId: z.string().min(1).max(200), agentId: Handle, kid: z.string().min(1).max(400) }) : z.object({ agentId: Handle, kid: z.string().min(1).max(400) }),
    responses: { 200: KeyRevoked },
    errors: [...rejectionsOf, [404, 'agent_not_found'], [404, 'key_not_found'], [409, 'key_already_revoked']],
    idempotent: true,
    authorize,
    async handler({ auth, params, deps, run }) {
      const p = params as { agentId: string; kid: string };
      return { status: 200, body: await revokeAgentKey(deps, run, auth, p.agentId, p.kid) };
    },
  });
}

/** Revocation of an agent and signing as one. */
function agentActionRoutes(app: FastifyInstance, deps: AppDeps): void {
  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/agents/:agentId/revoke',
    operationId: 'revokeAgent',
    summary: 'Revoke an agent (by its did:web or handle): every key is revoked, in creation order',
    tags: ['agents'],
    auth: 'api_key',
    scope: 'agents:write',
    params: z.object({ agentId: z.string().min(1).max(400) }),
    responses: { 200: AgentRevokedBody },
    errors: [...rejectionsOf, [404, 'agent_not_found'], [409, 'agent_already_revoked']],
    idempotent: true,
    async handler({ auth, params, deps, run }) {
      return { status: 200, body: await revokeAgent(deps, run, auth, params.agentId) };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/agents/:agentId/sign',
    operationId: 'signAsAgent',
    summary: "Sign a UTF-8 message with the agent's active key (Ed25519); verify against its DID document",
    tags: ['agents'],
    auth: 'api_key',
    scope: 'agents:write',
    params: z.object({ agentId: Handle }),
    body: z.object({ message: z.string().min(1).max(65_536) }),
    responses: { 200: z.object({ kid: z.string(), alg: z.literal('EdDSA'), signature: z.string() }) },
    errors: [...rejectionsOf, [404, 'agent_not_found'], [409, 'no_active_key']],
    async handler({ auth, params, body, deps }) {
      return { status: 200, body: await signAsAgent(deps, auth, params.agentId, body.message) };
    },
  });
}

/** The agents' reads and their DID documents. */
function agentReadRoutes(app: FastifyInstance, deps: AppDeps): void {
  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/agents',
    operationId: 'listAgents',
    summary: 'List the organization’s agents with their keys',
    tags: ['agents'],
    auth: 'api_key',
    scope: 'agents:read',
    query: z.object({ limit: z.coerce.number().int().min(1).max(200).default(50) }),
    responses: { 200: z.object({ agents: z.array(Agent).describe("The organization's agents, newest first.") }) },
    errors: [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth, query, deps }) {
      return { status: 200, body: { agents: await readAgents(deps, auth.orgId, undefined, query.limit) } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/agents/:agentId',
    operationId: 'getAgent',
    summary: 'Read an agent with its keys and their states',
    tags: ['agents'],
    auth: 'api_key',
    scope: 'agents:read',
    params: z.object({ agentId: z.string().min(1).max(400) }),
    responses: { 200: Agent },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'agent_not_found']],
    async handler({ auth, params, deps }) {
      return { status: 200, body: await getAgent(deps, auth, params.agentId) };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/:org/:handle/did.json',
    operationId: 'getDidDocument',
    summary: 'The did:web DID document of an agent: active and retired keys as JsonWebKey2020, revoked keys absent',
    tags: ['agents'],
    auth: 'open',
    params: z.object({ org: z.string().min(1).max(200), handle: z.string().min(1).max(200) }),
    responses: { 200: z.record(z.string(), z.unknown()) },
    errors: [[404, 'not_found']],
    async handler({ params, deps, reply }) {
      const doc = await resolveDid(deps, params.org, params.handle);
      void reply.header('cache-control', 'no-cache');
      return { status: 200, body: doc };
    },
  });
}

export async function agentRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  agentKeyRoutes(app, deps, false);
  agentKeyRoutes(app, deps, true);
  agentActionRoutes(app, deps);
  agentReadRoutes(app, deps);
}
