import { fauthDecider, fauthStream, x402MandateDecider, x402MandateStream } from '../../commands/x402.ts';
import { handleCommand } from '../eventstore/handler.ts';
import type { EventStore } from '../eventstore/port.ts';
import { newId } from '../ids.ts';
import { signReceipt, type X402Deps } from '../adapters/chain/x402.ts';
import type { Db } from '../postgres/db.ts';
import { PeriodicReactor } from './periodic.ts';

// Settles x402 rows whose outcome was unknown when the request answered: a
// transaction was broadcast but its receipt had not arrived. The receipt
// decides: success → executed (with a signed receipt), reverted → rejected and
// the reserved amount released. Money that moved is never recorded as not moved.

export class X402SettlementReactor extends PeriodicReactor {
  constructor(
    private readonly db: Db,
    private readonly store: EventStore,
    private readonly x402: X402Deps,
    private readonly now: () => Date = () => new Date(),
    intervalMs = 2_000,
  ) {
    super(intervalMs);
  }

  protected async pass(): Promise<number> {
    const { rows } = await this.db.query<{ id: string; org_id: string; project_id: string; network: string; settlement_tx: string; signer: string; payee: string; value_atomic: string; amount_minor: string; chain_id: number; asset: string; mandate_key: string }>(
      `SELECT id, org_id, project_id, network, settlement_tx, signer, payee, value_atomic::text, amount_minor::text, chain_id, asset, mandate_key FROM foreign_authorizations WHERE status = 'verified' AND settlement_tx IS NOT NULL LIMIT 100`,
    );
    let settled = 0;
    for (const r of rows) {
      const net = r.network === 'base' ? this.x402.live : this.x402.test;
      if (!net) continue;
      const state = await net.settlement.receiptOf(r.settlement_tx as `0x${string}`);
      if (state === 'pending') continue;
      const at = this.now().toISOString();
      const ctx = { orgId: r.org_id, projectId: r.project_id, actor: { kind: 'system' as const, id: 'x402-settlement' }, requestId: null, now: this.now };
      if (state === 'success') {
        const executionId = newId('x402exec');
        const receiptId = newId('rcpt');
        const receipt = signReceipt(this.x402, { id: receiptId, foreign_authorization_id: r.id, execution_id: executionId, network: r.network, chain_id: r.chain_id, asset: r.asset, signer: r.signer, payee: r.payee, value_atomic: r.value_atomic, tx_hash: r.settlement_tx, settled_at: at });
        await handleCommand(this.store, fauthDecider, fauthStream(r.id), { type: 'record', events: [{ type: 'x402.executed', data: { foreign_authorization_id: r.id, execution_id: executionId, tx_hash: r.settlement_tx, adapter: net.adapter, receipt_id: receiptId, receipt, at } }] }, ctx, { serialize: true });
      } else {
        await handleCommand(this.store, fauthDecider, fauthStream(r.id), { type: 'record', events: [{ type: 'x402.rejected', data: { foreign_authorization_id: r.id, reject_code: 'settlement_failed', detail: 'the transfer reverted', tx_hash: r.settlement_tx, at } }] }, ctx, { serialize: true });
        await handleCommand(this.store, x402MandateDecider, x402MandateStream(r.mandate_key), { type: 'release', fauthId: r.id, amount: BigInt(r.amount_minor) }, ctx, { serialize: true });
      }
      settled++;
    }
    return settled;
  }
}
