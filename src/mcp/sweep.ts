import { randomBytes } from 'node:crypto';
import { mcpSweepDecider, mcpSweepStream, type SweepCommand, type SweepTransfer } from '../../commands/mcp.ts';
import { signPaytoTransfer } from '../adapters/chain/payto.ts';
import type { Network, X402Deps } from '../adapters/chain/x402.ts';
import type { Vault } from '../adapters/vault.ts';
import { type CommandContext, handleCommand } from '../eventstore/handler.ts';
import type { EventStore, Position } from '../eventstore/port.ts';
import type { Db } from '../postgres/db.ts';
import { newId } from '../ids.ts';
import { type McpConfig, SimulatedCrash } from './config.ts';
import { orgSeed, platformWallet, serverLabel } from './payto.ts';

// The platform-fee sweep of one organization. Event-sourced in `mcp_sweep-<org>`:
//   1. take the lock (a lease; a crashed holder's lease expires and the next request takes it over);
//   2. settle what a previous holder left open: each intended transfer has a fixed EIP-3009
//      nonce, so the token answers whether it already happened (authorizationState) —
//      reconcile it as settled, or send the same authorization again;
//   3. record an intent per server with unswept fees (accrued − swept − in flight), then send:
//      the provisioned address signs transferWithAuthorization(source → platform wallet),
//      the facilitator submits it and pays the gas;
//   4. record each outcome; complete when nothing is open.
// A transfer can therefore happen at most once on chain, whatever crashes where.

const VALIDITY_SECONDS = 7n * 24n * 3600n;

export type SweepOutcome =
  | { kind: 'done'; body: { swept: number; total_atomic: string; partner_wallet?: string; transfers: { source: string; amount_atomic: string; status: string }[] } }
  | { kind: 'failed'; body: { transfers: { source: string; amount_atomic: string; status: string }[]; reason: string } };

export type SweepDeps = { db: Db; store: EventStore; vault: Vault; x402: X402Deps | undefined; mcp: McpConfig; waitFor(p: Position): Promise<unknown> };

export async function runSweep(d: SweepDeps, ctx: CommandContext): Promise<SweepOutcome> {
  const holder = newId('sweeper');
  const stream = mcpSweepStream(ctx.orgId);
  const run = async (c: SweepCommand) => {
    const r = await handleCommand(d.store, mcpSweepDecider, stream, c, ctx, { serialize: true });
    if (r.lastPosition) await d.waitFor(r.lastPosition);
    return r.state;
  };
  let state = await run({ type: 'acquire', sweepId: newId('sweep'), holder, leaseMs: d.mcp.sweepLeaseMs });
  await d.mcp.faults?.afterAcquire?.();
  let seed: Buffer;
  try {
    seed = await orgSeed(d.store, d.vault, ctx);
  } catch (err) {
    await run({ type: 'release', holder, reason: 'the address seed could not be read' });
    throw err;
  }
  const destination = await platformWallet(seed);
  const networkOf = (env: 'live' | 'test'): Network | undefined => (env === 'live' ? d.x402?.live : d.x402?.test);
  let failed = false;
  let reason = '';

  const send = async (t: SweepTransfer): Promise<void> => {
    const net = networkOf(t.environment);
    if (!net) {
      failed = true;
      reason = `no ${t.environment} network is configured`;
      return;
    }
    const auth = { from: t.source as `0x${string}`, to: t.destination as `0x${string}`, value: BigInt(t.amount_atomic), validAfter: BigInt(t.valid_after), validBefore: BigInt(t.valid_before), nonce: t.nonce as `0x${string}` };
    const outcome = async (o: Extract<SweepCommand, { type: 'outcome' }>['outcome']) => (state = await run({ type: 'outcome', holder, nonce: t.nonce, outcome: o }));
    try {
      if (await net.settlement.authorizationUsed(auth.from, auth.nonce)) return void (await outcome({ settled: true, txHash: null, reconciled: true }));
    } catch (err) {
      failed = true;
      reason = `the chain did not answer: ${(err as Error).message}`.slice(0, 300);
      return;
    }
    const nowSec = BigInt(Math.floor(ctx.now().getTime() / 1000));
    if (auth.validBefore <= nowSec + 6n) return void (await outcome({ settled: false, reason: 'the transfer authorization expired unused' }));
    const signature = await signPaytoTransfer(seed, serverLabel(t.server_id), { name: net.domainName, version: net.domainVersion, chainId: net.chainId, verifyingContract: net.token }, auth);
    const r = await net.settlement.settle(auth, signature);
    if (r.outcome === 'settled') {
      await d.mcp.faults?.afterBroadcast?.({ source: t.source, nonce: t.nonce, amount_atomic: t.amount_atomic });
      return void (await outcome({ settled: true, txHash: r.txHash, reconciled: false }));
    }
    if (r.outcome === 'unknown') {
      failed = true;
      reason = 'a transfer was broadcast but its outcome is not known yet';
      return;
    }
    // Reverted or never sent: the token still tells whether the nonce was spent (by an earlier broadcast).
    const used = await net.settlement.authorizationUsed(auth.from, auth.nonce).catch(() => null);
    if (used === true) return void (await outcome({ settled: true, txHash: null, reconciled: true }));
    if (used === null) {
      failed = true;
      reason = 'the chain did not answer';
      return;
    }
    failed = true;
    reason = r.reason.slice(0, 300);
    await outcome({ settled: false, reason: r.reason.slice(0, 300) });
  };

  try {
    // 2. What a previous holder left open.
    for (const t of state.open!.transfers.filter((x) => x.status === 'intended')) await send(t);
    // 3. New intents from the fees accrued so far.
    if (!failed) {
      const { rows } = await d.db.query<{ id: string; environment: 'live' | 'test'; payto_address: string; accrued: string }>(
        `SELECT s.id, s.environment, s.payto_address, coalesce(sum(c.fee_atomic), 0)::text AS accrued
           FROM mcp_servers s LEFT JOIN mcp_calls c ON c.server_id = s.id
          WHERE s.org_id = $1 AND s.payto_kind = 'provisioned' GROUP BY s.id ORDER BY s.id`,
        [ctx.orgId],
      );
      const nowSec = BigInt(Math.floor(ctx.now().getTime() / 1000));
      const items = rows
        .filter((r) => BigInt(r.accrued) > 0n && networkOf(r.environment))
        .map((r) => ({
          server_id: r.id,
          environment: r.environment,
          network: networkOf(r.environment)!.name,
          source: r.payto_address,
          destination,
          accrued_atomic: BigInt(r.accrued),
          nonce: `0x${randomBytes(32).toString('hex')}`,
          valid_after: '0',
          valid_before: (nowSec + VALIDITY_SECONDS).toString(),
        }));
      const before = new Set(state.open!.transfers.map((t) => t.nonce));
      if (items.length > 0) state = await run({ type: 'intend', holder, items });
      for (const t of state.open!.transfers.filter((x) => !before.has(x.nonce))) await send(t);
    }
  } catch (err) {
    // A crash stand-in or an unexpected failure: the lease is left to expire, as a dead process would.
    if (err instanceof SimulatedCrash) throw err;
    failed = true;
    reason = (err as Error).message.slice(0, 300);
  }

  const transfers = state.open!.transfers.map((t) => ({ source: t.source, amount_atomic: t.amount_atomic, status: t.status }));
  if (failed && state.open!.transfers.some((t) => t.status === 'intended')) {
    await run({ type: 'release', holder, reason });
    return { kind: 'failed', body: { transfers, reason } };
  }
  await run({ type: 'complete', holder });
  if (failed) return { kind: 'failed', body: { transfers, reason } };
  const settled = state.open!.transfers.filter((t) => t.status === 'settled');
  return {
    kind: 'done',
    body: {
      swept: settled.length,
      total_atomic: settled.reduce((a, t) => a + BigInt(t.amount_atomic), 0n).toString(),
      ...(transfers.length > 0 ? { partner_wallet: destination } : {}),
      transfers,
    },
  };
}
