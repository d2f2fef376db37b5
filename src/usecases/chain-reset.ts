import { incidentDecider, incidentStream } from '../../commands/audit.ts';
import { derivedUuid } from '../audit/chain.ts';
import type { ChainReset } from '../adapters/chain/nonces.ts';
import type { EventStore } from '../eventstore/port.ts';
import { handleCommand } from '../eventstore/handler.ts';
import type { Db } from '../postgres/db.ts';

// A settlement chain went backwards (src/adapters/chain/nonces.ts noticed it
// and resynchronized the facilitator's nonce). The ledger still records the
// settlements it made there; those whose transactions the chain no longer
// holds are money the ledger says moved and the chain says did not. Each
// organization with such settlements gets one audit incident naming them (its
// id derived from the reset, so instances noticing the same reset open one).

export const CHAIN_RESET_INCIDENT_KIND = 'settlement_chain_reset';

/** The most settlements one incident names one by one (the rest are counted). */
const NAMED_MAX = 50;

type Lost = { org_id: string; kind: 'x402' | 'mcp_call'; id: string; tx: string };

export type ChainResetDeps = { db: Db; store: EventStore; now: () => Date };

/**
 * Finds the recorded settlements on the reset chain (`environment` is the key
 * environment settling there) whose transactions it no longer holds, and opens
 * one incident per organization. Answers the incident ids and the lost settlements.
 */
export async function reportChainReset(deps: ChainResetDeps, reset: ChainReset, network: { name: string; environment: 'test' | 'live'; holds: (tx: `0x${string}`) => Promise<boolean> }): Promise<{ incidents: string[]; lost: Lost[] }> {
  const { rows } = await deps.db.query<Lost>(
    `SELECT org_id, 'x402' AS kind, id, settlement_tx AS tx FROM foreign_authorizations WHERE chain_id = $1 AND status = 'executed' AND settlement_tx IS NOT NULL
     UNION ALL
     SELECT org_id, 'mcp_call' AS kind, id, tx_hash AS tx FROM mcp_calls WHERE environment = $2
     ORDER BY org_id, id`,
    [reset.chainId, network.environment],
  );
  const lost: Lost[] = [];
  for (const r of rows) if (!(await network.holds(r.tx as `0x${string}`))) lost.push(r);
  const byOrg = new Map<string, Lost[]>();
  for (const l of lost) byOrg.set(l.org_id, [...(byOrg.get(l.org_id) ?? []), l]);
  const incidents: string[] = [];
  for (const [orgId, list] of byOrg) {
    const named = list.slice(0, NAMED_MAX).map((l) => `${l.kind === 'x402' ? 'x402 authorization' : 'MCP call'} ${l.id} (transaction ${l.tx})`);
    const detail =
      `The ${network.name} chain (chain id ${reset.chainId}) went backwards: it was at block ${reset.previous.height} of genesis ${reset.previous.genesis}, ` +
      `and is now at block ${reset.current.height} of genesis ${reset.current.genesis}. The facilitator's nonce was resynchronized from the chain (${reset.rememberedNonce} remembered, ${reset.chainNonce} on the chain). ` +
      `${list.length} settlement${list.length === 1 ? '' : 's'} of this organization recorded in the ledger ${list.length === 1 ? 'has' : 'have'} no transaction on the chain any more: ${named.join('; ')}` +
      `${list.length > NAMED_MAX ? `; and ${list.length - NAMED_MAX} more` : ''}. Their on-chain balances are gone; the ledger's records of them stand.`;
    const incidentId = derivedUuid('incident', `${orgId}/${CHAIN_RESET_INCIDENT_KIND}/${reset.chainId}/${reset.previous.genesis}/${reset.previous.height}/${reset.current.genesis}`);
    const sequence = Number((await deps.db.query<{ s: string }>('SELECT coalesce(max(sequence), 0)::text AS s FROM audit_chain_state WHERE org_id = $1', [orgId]).catch(() => ({ rows: [{ s: '0' }] }))).rows[0]?.s ?? 0);
    const ctx = { orgId, projectId: null, actor: { kind: 'system' as const, id: 'chain-reset' }, requestId: null, now: deps.now };
    await handleCommand(deps.store, incidentDecider, incidentStream(incidentId), { type: 'open', incidentId, orgId, kind: CHAIN_RESET_INCIDENT_KIND, sequence, detail }, ctx);
    incidents.push(incidentId);
  }
  return { incidents, lost };
}

/** A settlement network as the reset report needs it. */
export type ResetNetwork = { name: string; chainId: number; settlement: { holds: (tx: `0x${string}`) => Promise<boolean> } };

/**
 * The nonce gate's `onReset`: reports the reset off the request path (the send
 * that noticed it goes on with the resynchronized nonce) and logs one line.
 */
export function onChainReset(deps: ChainResetDeps, networks: () => { test: ResetNetwork | undefined; live: ResetNetwork | undefined }, log: (line: string) => void): (r: ChainReset) => void {
  return (reset) => {
    const n = networks();
    const environment = n.test?.chainId === reset.chainId ? 'test' : 'live';
    const network = environment === 'test' ? n.test : n.live;
    log(`the chain ${reset.chainId} went backwards (block ${reset.previous.height} of genesis ${reset.previous.genesis.slice(0, 10)}… to block ${reset.current.height} of genesis ${reset.current.genesis.slice(0, 10)}…): the facilitator's nonce was resynchronized from the chain`);
    if (!network) return;
    void reportChainReset(deps, reset, { name: network.name, environment, holds: (tx) => network.settlement.holds(tx) }).then(
      (r) => r.incidents.length && log(`${r.lost.length} recorded settlement(s) are no longer on the chain ${reset.chainId}: audit incident(s) ${r.incidents.join(', ')}`),
      (err: unknown) => log(`reporting the reset of chain ${reset.chainId} failed: ${(err as Error).message}`),
    );
  };
}
