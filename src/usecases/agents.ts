import * as ed from '@noble/ed25519';
import { type AgentState, agentDecider, agentStream, DID_SEGMENT, type NewKey } from '../../commands/agent.ts';
import type { Vault } from '../adapters/vault.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import '../audit/note.ts'; // configures @noble/ed25519's SHA-512
import { isoText as TS } from '../postgres/iso-text.ts';
import type { Ports, RunCommand, Tenant } from './context.ts';

// Agent identities (spec 4.9): Ed25519 keys generated here, private keys in
// the vault, did:web identifiers and the DID documents they resolve to.

export const didOf = (domain: string, orgId: string, handle: string) => `did:web:${domain}:${orgId}:${handle}`;

export type AgentKeyView = { kid: string; ordinal: number; pubkey: string; status: 'active' | 'retired' | 'revoked'; created_at: string; retired_at: string | null; revoked_at: string | null };
export type AgentView = { agent_id: string; agent_did: string; principal_ref: string; display_name: string | null; status: 'active' | 'revoked'; created_at: string; revoked_at: string | null; keys: AgentKeyView[] };

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

type AgentPorts = Pick<Ports, 'vault' | 'didDomain'>;

async function newKey(vault: Vault, orgId: string): Promise<NewKey & { secret: Uint8Array }> {
  const { secretKey, publicKey } = ed.keygen();
  const privateKeyRef = await vault.put(orgId, 'agent_signing_key', secretKey);
  return { pubkey: Buffer.from(publicKey).toString('base64'), privateKeyRef, secret: secretKey };
}

/**
 * A did:web (or a kid under it) named in a path, as this service writes it: the
 * router has decoded the path once, so the domain's port arrives as `:port`
 * where the DID holds `%3A<port>` (a client that encodes only `#` as `%23`, as
 * the spec says, sends it so).
 */
function asWritten(didDomain: string, segment: string): string {
  const decoded = decodeURIComponent(didDomain);
  return decoded !== didDomain && segment.startsWith(`did:web:${decoded}:`) ? `did:web:${didDomain}:${segment.slice(`did:web:${decoded}:`.length)}` : segment;
}

/** The agent handle named by a path segment: a handle, or a did:web of this service and organization. */
export function handleFrom(ports: Pick<Ports, 'didDomain'>, tenant: Pick<Tenant, 'orgId'>, raw: string): string {
  const segment = asWritten(ports.didDomain, raw);
  if (!segment.startsWith('did:')) return segment;
  const prefix = `did:web:${ports.didDomain}:${tenant.orgId}:`;
  if (!segment.startsWith(prefix)) throw new Rejection('agent_not_found', 'agent not found');
  return segment.slice(prefix.length);
}

/** Register an agent: a new key, its private half in the vault (deleted again when the registration is refused). */
export async function registerAgent(ports: AgentPorts, run: RunCommand, tenant: Pick<Tenant, 'orgId'>, input: { agent_id: string; principal_ref: string; display_name?: string | null | undefined }) {
  if (!DID_SEGMENT.test(input.agent_id)) throw new Rejection('invalid_did_segment', 'agent_id holds characters a did:web cannot hold', { field: 'agent_id' });
  const did = didOf(ports.didDomain, tenant.orgId, input.agent_id);
  const key = await newKey(ports.vault, tenant.orgId);
  try {
    const r = await run(agentDecider, agentStream(tenant.orgId, input.agent_id), {
      type: 'register',
      handle: input.agent_id,
      did,
      principalRef: input.principal_ref,
      displayName: input.display_name ?? null,
      key,
    });
    const s = r.state as Exclude<AgentState, { status: 'none' }>;
    return { agent_did: did, kid: s.keys[0]!.kid, pubkey: key.pubkey, status: 'active' as const };
  } catch (err) {
    await ports.vault.delete(tenant.orgId, key.privateKeyRef).catch(() => {});
    throw err;
  }
}

/** Rotate: the active key is retired, a new one is active. */
export async function rotateAgentKey(ports: AgentPorts, run: RunCommand, tenant: Pick<Tenant, 'orgId'>, handle: string) {
  const key = await newKey(ports.vault, tenant.orgId);
  try {
    const r = await run(agentDecider, agentStream(tenant.orgId, handle), { type: 'rotate', key });
    const s = r.state as Exclude<AgentState, { status: 'none' }>;
    const active = s.keys.find((k) => k.status === 'active')!;
    const retired = r.events[0]!.type === 'agent.key_rotated' ? r.events[0]!.data.retired_kid : '';
    return { agent_did: s.did, kid: active.kid, pubkey: active.pubkey, retired_kid: retired, status: 'active' as const };
  } catch (err) {
    await ports.vault.delete(tenant.orgId, key.privateKeyRef).catch(() => {});
    throw err;
  }
}

/** Revoke one key (named as written in the path). */
export async function revokeAgentKey(ports: Pick<Ports, 'didDomain'>, run: RunCommand, tenant: Pick<Tenant, 'orgId'>, handle: string, rawKid: string) {
  const kid = asWritten(ports.didDomain, rawKid);
  const r = await run(agentDecider, agentStream(tenant.orgId, handle), { type: 'revoke_key', kid });
  const e = r.events[0]!;
  return { kid, status: 'revoked' as const, revoked_at: e.type === 'agent.key_revoked' ? e.data.revoked_at : '' };
}

/** Revoke an agent (by its did:web or handle): every key is revoked. */
export async function revokeAgent(ports: Pick<Ports, 'didDomain'>, run: RunCommand, tenant: Pick<Tenant, 'orgId'>, agentId: string) {
  const handle = handleFrom(ports, tenant, agentId);
  const r = await run(agentDecider, agentStream(tenant.orgId, handle), { type: 'revoke_agent' });
  const e = r.events[0]!;
  if (e.type !== 'agent.revoked') throw new Error('unexpected event');
  return { did: e.data.did, status: 'revoked' as const, revoked_at: e.data.revoked_at, revoked_kids: e.data.revoked_kids, limits: REVOCATION_LIMITS };
}

/** Sign a UTF-8 message with the agent's active key. */
export async function signAsAgent(ports: Pick<Ports, 'store' | 'vault'>, tenant: Pick<Tenant, 'orgId'>, handle: string, message: string) {
  const { state } = await loadState(ports.store, agentStream(tenant.orgId, handle), agentDecider);
  if (state.status === 'none') throw new Rejection('agent_not_found', 'agent not found');
  const key = state.status === 'active' ? state.keys.find((k) => k.status === 'active') : undefined;
  if (!key) throw new Rejection('no_active_key', 'the agent has no active key');
  const secret = await ports.vault.get(tenant.orgId, key.privateKeyRef);
  if (!secret) throw new Rejection('vault_unavailable', 'the signing key could not be read from the vault', { retriable: true });
  const signature = ed.sign(Buffer.from(message, 'utf8'), secret);
  return { kid: key.kid, alg: 'EdDSA' as const, signature: Buffer.from(signature).toString('base64') };
}

/** The organization's agents (or the one of `handle`) with their keys. */
export async function readAgents(ports: Pick<Ports, 'db'>, orgId: string, handle: string | undefined, limit: number): Promise<AgentView[]> {
  const { rows } = await ports.db.query<Omit<AgentView, 'keys'>>(
    `SELECT ${AGENT_COLUMNS}
     FROM agents WHERE org_id = $1 ${handle !== undefined ? 'AND handle = $3' : ''} ORDER BY agents.created_at, handle LIMIT $2`,
    handle !== undefined ? [orgId, limit, handle] : [orgId, limit],
  );
  return withKeys(ports, orgId, rows);
}

/** Agents as read from `agents`, with their keys in order. */
export async function withKeys(ports: Pick<Ports, 'db'>, orgId: string, rows: Omit<AgentView, 'keys'>[]): Promise<AgentView[]> {
  if (rows.length === 0) return [];
  const { rows: keys } = await ports.db.query<AgentKeyView & { handle: string }>(
    `SELECT handle, kid, ordinal, pubkey, status, ${TS('created_at')} AS created_at, ${TS('retired_at')} AS retired_at, ${TS('revoked_at')} AS revoked_at
     FROM agent_keys WHERE org_id = $1 AND handle = ANY($2) ORDER BY ordinal`,
    [orgId, rows.map((r) => r.agent_id)],
  );
  return rows.map((r) => ({ ...r, keys: keys.filter((k) => k.handle === r.agent_id).map(({ handle: _h, ...k }) => k) }));
}

/** The columns of an agent view, from `agents`. */
export const AGENT_COLUMNS = `handle AS agent_id, did AS agent_did, principal_ref, display_name, status, ${TS('created_at')} AS created_at, ${TS('revoked_at')} AS revoked_at`;

/** One agent by its handle or did:web. */
export async function getAgent(ports: Pick<Ports, 'db' | 'didDomain'>, tenant: Pick<Tenant, 'orgId'>, agentId: string): Promise<AgentView> {
  const [agent] = await readAgents(ports, tenant.orgId, handleFrom(ports, tenant, agentId), 1);
  if (!agent) throw new Rejection('agent_not_found', 'agent not found');
  return agent;
}

/** The did:web DID document of an agent: active and retired keys as JsonWebKey2020, revoked keys absent. */
export async function resolveDid(ports: Pick<Ports, 'db'>, org: string, handle: string): Promise<Record<string, unknown>> {
  const [agent] = await readAgents(ports, org, handle, 1);
  if (!agent) throw new Rejection('not_found', 'no such DID');
  return didDocument(agent);
}

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
