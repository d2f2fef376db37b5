import { type ConsumerState, consumerDecider, consumerStream, ownConsumer } from '../../commands/consumer.ts';
import { walletRows, type WalletFundingSource, type WalletRow } from '../../projections/consumer.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import { newId } from '../ids.ts';
import { isoText as TS } from '../postgres/iso-text.ts';
import type { Ports, RunCommand, Tenant } from './context.ts';
import { pixWallets } from './pix-wallet.ts';

// Consumers (titulars), their wallet view per currency. A consumer belongs to
// the organization: every project of it reads, lists and updates it; what hangs
// off it (mandates, cards, consents) stays with the project that made it, so
// the id lists and the wallet show the calling project's records only.

export type ConsumerView = {
  id: string;
  display_name: string | null;
  document: string | null;
  document_source: string | null;
  document_verified_at: string | null;
  person_type: string | null;
  tax_type: string | null;
  status: 'unverified' | 'verified';
  metadata: Record<string, unknown>;
  created_at: string;
};

const COLUMNS = `id, display_name, document, document_source, ${TS('document_verified_at')} AS document_verified_at, person_type, tax_type, status, metadata, ${TS('created_at')} AS created_at`;

export const consumerNotFound = () => new Rejection('not_found', 'consumer not found');

/**
 * Test and live are two worlds (docs/decisions.md, "Issue 60: errors and
 * environments"): a consumer is of its home project's environment, and is
 * seen only from projects of the same one (`$n`: the calling project's id).
 * A project's environment never changes, so this holds for good.
 */
const sameWorld = (n: number) => `(SELECT environment FROM projects WHERE id = consumers.project_id) = (SELECT environment FROM projects WHERE id = $${n})`;

/** The organization's consumer of the calling project's environment, or undefined when absent, of the other environment, or another organization's. */
export async function readConsumer(ports: Pick<Ports, 'db'>, tenant: Tenant, id: string): Promise<ConsumerView | undefined> {
  const { rows } = await ports.db.query<ConsumerView>(`SELECT ${COLUMNS} FROM consumers WHERE id = $1 AND org_id = $2 AND ${sameWorld(3)}`, [id, tenant.orgId, tenant.projectId]);
  return rows[0];
}

/** Refuses (404, as an absent one) a consumer the calling project does not see: another organization's or of the other environment. */
export async function requireConsumer(ports: Pick<Ports, 'db'>, tenant: Tenant, id: string): Promise<ConsumerView> {
  const c = await readConsumer(ports, tenant, id);
  if (!c) throw consumerNotFound();
  return c;
}

/**
 * A consumer a new record names (a mandate, a bank consent), read from its
 * stream (no read model in between): the organization's, of the calling
 * project's environment; else 404 `not_found` on `consumer_id`, as an absent one.
 */
export async function namedConsumer(ports: Pick<Ports, 'db' | 'store'>, tenant: Tenant, consumerId: string): Promise<void> {
  const refused = () => new Rejection('not_found', 'consumer not found', { field: 'consumer_id' });
  const { state } = await loadState(ports.store, consumerStream(consumerId), consumerDecider);
  let home: string;
  try {
    home = ownConsumer(state, tenant).projectId;
  } catch {
    throw refused();
  }
  const { rows } = await ports.db.query<{ same: boolean | null }>('SELECT (SELECT environment FROM projects WHERE id = $1) = (SELECT environment FROM projects WHERE id = $2) AS same', [home, tenant.projectId]);
  if (rows[0]?.same !== true) throw refused();
}

function view(s: Extract<ConsumerState, { status: 'unverified' }>): ConsumerView {
  return { id: s.id, display_name: s.displayName, document: null, document_source: null, document_verified_at: null, person_type: null, tax_type: s.taxType, status: 'unverified', metadata: s.metadata, created_at: s.createdAt };
}

export async function createConsumer(run: RunCommand, tenant: Tenant, input: { displayName: string | null; metadata: Record<string, unknown> }): Promise<ConsumerView> {
  const id = newId('cns');
  const r = await run(consumerDecider, consumerStream(id), { type: 'create', consumerId: id, tenant, displayName: input.displayName, metadata: input.metadata }, { expectedRevision: 'no_stream' });
  return view(r.state as Extract<ConsumerState, { status: 'unverified' }>);
}

export async function updateConsumer(
  ports: Pick<Ports, 'db'>,
  run: RunCommand,
  tenant: Tenant,
  id: string,
  change: { displayName?: string | null; metadata?: Record<string, unknown>; taxType?: 'PJ' | 'MEI' | 'ME' | 'PF' },
): Promise<ConsumerView> {
  await requireConsumer(ports, tenant, id);
  const r = await run(consumerDecider, consumerStream(id), { type: 'update', tenant, ...change });
  return view(r.state as Extract<ConsumerState, { status: 'unverified' }>);
}

/** The organization's consumers of the calling project's environment (from every project of it), newest first. */
export async function listConsumers(ports: Pick<Ports, 'db'>, tenant: Tenant, q: { limit: number; verified?: boolean }): Promise<ConsumerView[]> {
  const params: unknown[] = [tenant.orgId, q.limit, tenant.projectId];
  let filter = '';
  if (q.verified !== undefined) {
    params.push(q.verified ? 'verified' : 'unverified');
    filter = ' AND status = $4';
  }
  const { rows } = await ports.db.query<ConsumerView>(`SELECT ${COLUMNS} FROM consumers WHERE org_id = $1 AND ${sameWorld(3)}${filter} ORDER BY consumers.created_at DESC, id LIMIT $2`, params);
  return rows;
}

/** A consumer with the ids of the calling project's mandates and active cards of it. */
export async function consumerDetail(ports: Pick<Ports, 'db'>, tenant: Tenant, id: string): Promise<ConsumerView & { mandate_ids: string[]; card_ids: string[] }> {
  const c = await readConsumer(ports, tenant, id);
  if (!c) throw consumerNotFound();
  const m = await ports.db.query<{ id: string }>('SELECT id FROM mandates WHERE consumer_id = $1 AND org_id = $2 AND project_id = $3 ORDER BY mandates.created_at, id', [c.id, tenant.orgId, tenant.projectId]);
  const cards = await ports.db.query<{ card_id: string }>(`SELECT card_id FROM mandate_cards WHERE consumer_id = $1 AND org_id = $2 AND project_id = $3 AND status = 'active' ORDER BY mandate_cards.bound_at`, [
    c.id,
    tenant.orgId,
    tenant.projectId,
  ]);
  return { ...c, mandate_ids: m.rows.map((r) => r.id), card_ids: cards.rows.map((r) => r.card_id) };
}

/** Per currency: authorized, spent and available (bigint: exact JSON integers on the wire), with the Pix balance. */
export async function consumerWallet(ports: Pick<Ports, 'db' | 'now'>, tenant: Tenant, id: string): Promise<{ consumer_id: string; currencies: (WalletRow & { pix_balance_minor?: bigint; rail?: string })[] }> {
  const c = await readConsumer(ports, tenant, id);
  if (!c) throw consumerNotFound();
  // The calling project's mandates of this consumer that still count: active or paused, not expired.
  // One entry per currency slot of each (a single-currency mandate has one); a slot's authority is its cap plus what transfers moved in, less what they moved out.
  const { rows } = await ports.db.query<{ id: string; currency: string; rail: string | null; cap: string; spent: string; funding_source_id: string | null }>(
    `SELECT m.id, s.currency, s.rail, (s.cap_minor + s.moved_in_minor - s.moved_out_minor)::text AS cap, s.spent_minor::text AS spent, s.funding_source_id
     FROM mandates m JOIN mandate_slots s ON s.mandate_id = m.id
     WHERE m.consumer_id = $1 AND m.org_id = $2 AND m.project_id = $3 AND m.status IN ('active', 'paused') AND m.expires_at > $4 ORDER BY m.created_at, m.id, s.idx`,
    [c.id, tenant.orgId, tenant.projectId, ports.now().toISOString()],
  );
  const mandates = rows.map((r) => ({ id: r.id, currency: r.currency, cap_minor: BigInt(r.cap), spent_minor: BigInt(r.spent) }));
  // Funding sources: those a consent provisioned for the slots, and the consumer's Pix accounts at the PSP (each row also shows its Pix balance).
  const pix = await pixWallets(ports, tenant, c.id);
  const fundingSources: WalletFundingSource[] = [
    ...rows.filter((r) => r.funding_source_id !== null).map((r) => ({ id: r.funding_source_id!, currency: r.currency })),
    ...pix.filter((w) => w.status === 'active').map((w) => ({ id: w.funding_source_id, currency: w.currency })),
  ];
  const currencies: (WalletRow & { pix_balance_minor?: bigint; rail?: string })[] = walletRows(mandates, fundingSources);
  // The rail of a currency's slots, when a slot names one (a consent's mandate).
  for (const r of currencies) {
    const rail = rows.find((x) => x.currency === r.currency && x.rail !== null)?.rail;
    if (rail) r.rail = rail;
  }
  for (const w of pix) {
    const row = currencies.find((r) => r.currency === w.currency);
    if (row) row.pix_balance_minor = (row.pix_balance_minor ?? 0n) + BigInt(w.balance_minor);
  }
  return { consumer_id: c.id, currencies };
}
