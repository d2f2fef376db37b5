import * as ed from '@noble/ed25519';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { type AgentState, agentDecider, agentStream, DID_SEGMENT, type NewKey } from '../../commands/agent.ts';
import type { Vault } from '../adapters/vault.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import '../audit/note.ts'; // configures @noble/ed25519's SHA-512
import { ApiError, forbidden } from './errors.ts';
import { defineRoute, type AppDeps, type Ctx } from './route.ts';
import { Timestamp, isoText as TS } from './schemas.ts';
import type { ApiKeyAuth } from './auth.ts';

// Agent identities (spec 4.9): Ed25519 keys generated here, private keys in
// the vault, did:web identifiers and the DID documents they resolve to.

export const didOf = (domain: string, orgId: string, handle: string) => `did:web:${domain}:${orgId}:${handle}`;

const Handle = z.string().min(1).max(64);
const AgentKey = z.object({ kid: z.string(), ordinal: z.number().int(), pubkey: z.string(), status: z.enum(['active', 'retired', 'revoked']), created_at: Timestamp, retired_at: Timestamp.nullable(), revoked_at: Timestamp.nullable() });
export const Agent = z
  .object({ agent_id: z.string(), agent_did: z.string(), principal_ref: z.string(), display_name: z.string().nullable(), status: z.enum(['active', 'revoked']), created_at: Timestamp, revoked_at: Timestamp.nullable(), keys: z.array(AgentKey) })
  .meta({ id: 'Agent' });

const Registered = z.object({ agent_did: z.string(), kid: z.string(), pubkey: z.string(), status: z.literal('active') });
const Rotated = z.object({ agent_did: z.string(), kid: z.string(), pubkey: z.string(), retired_kid: z.string(), status: z.literal('active') });
const KeyRevoked = z.object({ kid: z.string(), status: z.literal('revoked'), revoked_at: Timestamp });
const AgentRevokedBody = z.object({
  did: z.string(),
  status: z.literal('revoked'),
  revoked_at: Timestamp,
  revoked_kids: z.array(z.string()),
  limits: z.object({ stops: z.array(z.string()), does_not_stop: z.string(), issue: z.string() }),
});

export const REVOCATION_LIMITS = {
  stops: [
    'signing with any of the agent’s keys through this service',
    'rotating or adding keys for the agent',
    'naming the agent in a new mandate (mandate_agent_key_invalid)',
    'verifying new statements against the agent’s DID document, which now lists no keys',
  ],
  does_not_stop:
    'Signatures made before revocation remain valid evidence of what was signed then: the public keys stay in the event log and the audit chain. Mandates already granted to the agent, and anything a counterparty cached, are not changed by this call.',
  issue: 'Revoke or pause the agent’s existing mandates separately (POST /v1/mandates/{id}/revoke), and tell counterparties that cache DID documents.',
};

async function newKey(vault: Vault, orgId: string): Promise<NewKey & { secret: Uint8Array }> {
  const { secretKey, publicKey } = ed.keygen();
  const privateKeyRef = await vault.put(orgId, 'agent_signing_key', secretKey);
  return { pubkey: Buffer.from(publicKey).toString('base64'), privateKeyRef, secret: secretKey };
}

type AnyCtx = Ctx<unknown, unknown, unknown, ApiKeyAuth>;

function checkOrgPath(orgId: string, auth: ApiKeyAuth) {
  if (!DID_SEGMENT.test(orgId)) throw new ApiError(400, 'invalid_did_segment', 'orgId holds characters a did:web cannot hold');
  if (orgId !== auth.orgId) throw forbidden('orgId is not the authenticated organization');
}

/**
 * A did:web (or a kid under it) named in a path, as this service writes it: the
 * router has decoded the path once, so the domain's port arrives as `:port`
 * where the DID holds `%3A<port>` (a client that encodes only `#` as `%23`, as
 * the spec says, sends it so).
 */
function asWritten(ctx: AnyCtx, segment: string): string {
  const domain = ctx.deps.didDomain;
  const decoded = decodeURIComponent(domain);
  return decoded !== domain && segment.startsWith(`did:web:${decoded}:`) ? `did:web:${domain}:${segment.slice(`did:web:${decoded}:`.length)}` : segment;
}

/** The agent handle named by a path segment: a handle, or a did:web of this service and organization. */
function handleFrom(ctx: AnyCtx, raw: string): string {
  const segment = asWritten(ctx, raw);
  if (!segment.startsWith('did:')) return segment;
  const prefix = `did:web:${ctx.deps.didDomain}:${ctx.auth.orgId}:`;
  if (!segment.startsWith(prefix)) throw new Rejection('agent_not_found', 'agent not found');
  return segment.slice(prefix.length);
}

async function register(ctx: AnyCtx, body: { agent_id: string; principal_ref: string; display_name?: string | null | undefined }) {
  const { auth, deps } = ctx;
  if (!DID_SEGMENT.test(body.agent_id)) throw new ApiError(400, 'invalid_did_segment', 'agent_id holds characters a did:web cannot hold', { field: 'agent_id' });
  const did = didOf(deps.didDomain, auth.orgId, body.agent_id);
  const key = await newKey(deps.vault, auth.orgId);
  try {
    const r = await ctx.run(agentDecider, agentStream(auth.orgId, body.agent_id), {
      type: 'register',
      handle: body.agent_id,
      did,
      principalRef: body.principal_ref,
      displayName: body.display_name ?? null,
      key,
    });
    const s = r.state as Exclude<AgentState, { status: 'none' }>;
    return { status: 201, body: { agent_did: did, kid: s.keys[0]!.kid, pubkey: key.pubkey, status: 'active' } };
  } catch (err) {
    await deps.vault.delete(auth.orgId, key.privateKeyRef).catch(() => {});
    throw err;
  }
}

async function rotate(ctx: AnyCtx, handle: string) {
  const { auth, deps } = ctx;
  const key = await newKey(deps.vault, auth.orgId);
  try {
    const r = await ctx.run(agentDecider, agentStream(auth.orgId, handle), { type: 'rotate', key });
    const s = r.state as Exclude<AgentState, { status: 'none' }>;
    const active = s.keys.find((k) => k.status === 'active')!;
    const retired = r.events[0]!.type === 'agent.key_rotated' ? r.events[0]!.data.retired_kid : '';
    return { status: 201, body: { agent_did: s.did, kid: active.kid, pubkey: active.pubkey, retired_kid: retired, status: 'active' } };
  } catch (err) {
    await deps.vault.delete(auth.orgId, key.privateKeyRef).catch(() => {});
    throw err;
  }
}

async function revokeKey(ctx: AnyCtx, handle: string, raw: string) {
  const kid = asWritten(ctx, raw);
  const r = await ctx.run(agentDecider, agentStream(ctx.auth.orgId, handle), { type: 'revoke_key', kid });
  const e = r.events[0]!;
  return { status: 200, body: { kid, status: 'revoked', revoked_at: e.type === 'agent.key_revoked' ? e.data.revoked_at : '' } };
}

const rejectionsOf = [
  [400, 'invalid_body'],
  [400, 'invalid_did_segment'],
  [401, 'unauthorized'],
  [403, 'forbidden'],
] as const;

export async function agentRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const RegisterBody = z.object({ agent_id: Handle, principal_ref: z.string().trim().min(1).max(200), display_name: z.string().trim().min(1).max(200).nullable().optional() });

  for (const scoped of [false, true]) {
    const base = scoped ? '/v1/orgs/:orgId/agents' : '/v1/agents';
    const Params = scoped ? z.object({ orgId: z.string().min(1).max(200) }) : z.object({});
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
      params: Params,
      body: RegisterBody,
      responses: { 201: Registered },
      errors: [...rejectionsOf, [409, 'agent_exists']],
      idempotent: true,
      authorize,
      async handler(ctx) {
        return register(ctx as AnyCtx, ctx.body);
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
      async handler(ctx) {
        return rotate(ctx as AnyCtx, (ctx.params as { agentId: string }).agentId);
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
      async handler(ctx) {
        const p = ctx.params as { agentId: string; kid: string };
        return revokeKey(ctx as AnyCtx, p.agentId, p.kid);
      },
    });
  }

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
    async handler(ctx) {
      const handle = handleFrom(ctx as AnyCtx, ctx.params.agentId);
      const r = await ctx.run(agentDecider, agentStream(ctx.auth.orgId, handle), { type: 'revoke_agent' });
      const e = r.events[0]!;
      if (e.type !== 'agent.revoked') throw new Error('unexpected event');
      return { status: 200, body: { did: e.data.did, status: 'revoked', revoked_at: e.data.revoked_at, revoked_kids: e.data.revoked_kids, limits: REVOCATION_LIMITS } };
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
      const { state } = await loadState(deps.store, agentStream(auth.orgId, params.agentId), agentDecider);
      if (state.status === 'none') throw new Rejection('agent_not_found', 'agent not found');
      const key = state.status === 'active' ? state.keys.find((k) => k.status === 'active') : undefined;
      if (!key) throw new Rejection('no_active_key', 'the agent has no active key');
      const secret = await deps.vault.get(auth.orgId, key.privateKeyRef);
      if (!secret) throw new ApiError(503, 'vault_unavailable', 'the signing key could not be read from the vault', { retriable: true });
      const signature = ed.sign(Buffer.from(body.message, 'utf8'), secret);
      return { status: 200, body: { kid: key.kid, alg: 'EdDSA', signature: Buffer.from(signature).toString('base64') } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/agents',
    operationId: 'listAgents',
    summary: 'List the organization’s agents with their keys',
    tags: ['agents'],
    auth: 'api_key',
    scope: 'agents:read',
    query: z.object({ limit: z.coerce.number().int().min(1).max(200).default(50) }),
    responses: { 200: z.object({ agents: z.array(Agent) }) },
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
    async handler(ctx) {
      const [agent] = await readAgents(ctx.deps, ctx.auth.orgId, handleFrom(ctx as AnyCtx, ctx.params.agentId), 1);
      if (!agent) throw new Rejection('agent_not_found', 'agent not found');
      return { status: 200, body: agent };
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
      const [agent] = await readAgents(deps, params.org, params.handle, 1);
      if (!agent) throw new ApiError(404, 'not_found', 'no such DID');
      void reply.header('cache-control', 'no-cache');
      return { status: 200, body: didDocument(agent) };
    },
  });
}

type AgentView = z.infer<typeof Agent>;

export function didDocument(agent: AgentView): Record<string, unknown> {
  const did = agent.agent_did;
  const base = { '@context': ['https://www.w3.org/ns/did/v1', 'https://w3id.org/security/suites/jws-2020/v1'], id: did, controller: did };
  if (agent.status === 'revoked') return { ...base, verificationMethod: [], authentication: [], assertionMethod: [], deactivated: true };
  const usable = agent.keys.filter((k) => k.status !== 'revoked');
  return {
    ...base,
    verificationMethod: usable.map((k) => ({
      id: k.kid,
      type: 'JsonWebKey2020',
      controller: did,
      publicKeyJwk: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(k.pubkey, 'base64').toString('base64url') },
    })),
    // Only the active key authenticates; retired keys still verify earlier assertions.
    authentication: usable.filter((k) => k.status === 'active').map((k) => k.kid),
    assertionMethod: usable.map((k) => k.kid),
  };
}


async function readAgents(deps: AppDeps, orgId: string, handle: string | undefined, limit: number): Promise<AgentView[]> {
  const { rows } = await deps.db.query<Omit<AgentView, 'keys'>>(
    `SELECT handle AS agent_id, did AS agent_did, principal_ref, display_name, status, ${TS('created_at')} AS created_at, ${TS('revoked_at')} AS revoked_at
     FROM agents WHERE org_id = $1 ${handle !== undefined ? 'AND handle = $3' : ''} ORDER BY created_at, handle LIMIT $2`,
    handle !== undefined ? [orgId, limit, handle] : [orgId, limit],
  );
  if (rows.length === 0) return [];
  const { rows: keys } = await deps.db.query<z.infer<typeof AgentKey> & { handle: string }>(
    `SELECT handle, kid, ordinal, pubkey, status, ${TS('created_at')} AS created_at, ${TS('retired_at')} AS retired_at, ${TS('revoked_at')} AS revoked_at
     FROM agent_keys WHERE org_id = $1 AND handle = ANY($2) ORDER BY ordinal`,
    [orgId, rows.map((r) => r.agent_id)],
  );
  return rows.map((r) => ({ ...r, keys: keys.filter((k) => k.handle === r.agent_id).map(({ handle: _h, ...k }) => k) }));
}
