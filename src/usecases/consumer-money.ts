import { isoText as TS } from '../postgres/iso-text.ts';
import type { Ports, Tenant } from './context.ts';
import type { ConsumerView } from './consumers.ts';
import { type Page, pageOf, parseTimeCursor, timeCursor } from './agent-activity.ts';

export type { Page };

// What a person browses of consumers and their money (the dashboard's
// Consumers and Mandates pages): lists that grow by a cursor (the last row's
// key), never by an offset, each over an index (projections/consumer.ts,
// mandate.ts, bank-consent.ts, pix.ts). The writes are the API's use cases.

const CONSUMER_COLUMNS = `id, display_name, document, document_source, ${TS('document_verified_at')} AS document_verified_at, person_type, tax_type, status, metadata, ${TS('created_at')} AS created_at`;

/** A (created_at, id) cursor condition on `alias`, its parameters appended to `params`. */
function before(params: unknown[], raw: string | undefined, alias = ''): string {
  const c = parseTimeCursor(raw);
  if (!c) return '';
  params.push(c.at, c.id);
  return ` AND (${alias}created_at, ${alias}id) < ($${params.length - 1}::timestamptz, $${params.length})`;
}

/** The organization's consumers, newest first. */
export async function browseConsumers(ports: Pick<Ports, 'db'>, orgId: string, q: { before?: string | undefined; limit: number }): Promise<Page<ConsumerView>> {
  const params: unknown[] = [orgId, q.limit + 1];
  const cursor = before(params, q.before);
  const { rows } = await ports.db.query<ConsumerView>(`SELECT ${CONSUMER_COLUMNS} FROM consumers WHERE org_id = $1${cursor} ORDER BY consumers.created_at DESC, id DESC LIMIT $2`, params);
  return pageOf(rows, q.limit, (last) => timeCursor(last.created_at, last.id));
}

export type MandateLine = { id: string; consumer_id: string; agent_id: string; purpose: string; display_name: string | null; status: string; currency: string; cap_minor: string; spent_minor: string; expires_at: string; created_at: string };

/** The project's mandates (of one consumer or one agent, when named), newest first; status is effective (past expires_at: expired). */
export async function browseMandates(ports: Pick<Ports, 'db' | 'now'>, tenant: Tenant, q: { consumer_id?: string | undefined; agent_id?: string | undefined; before?: string | undefined; limit: number }): Promise<Page<MandateLine>> {
  const params: unknown[] = [tenant.orgId, tenant.projectId, q.limit + 1, ports.now().toISOString()];
  let where = 'm.org_id = $1 AND m.project_id = $2';
  if (q.consumer_id) where += ` AND m.consumer_id = $${params.push(q.consumer_id)}`;
  if (q.agent_id) where += ` AND m.agent_id = $${params.push(q.agent_id)}`;
  where += before(params, q.before, 'm.');
  const { rows } = await ports.db.query<MandateLine>(
    `SELECT m.id, m.consumer_id, m.agent_id, m.purpose, m.display_name,
       CASE WHEN m.status IN ('active', 'paused') AND m.expires_at <= $4 THEN 'expired' ELSE m.status END AS status,
       m.currency, m.cap_minor::text, m.spent_minor::text, ${TS('m.expires_at')} AS expires_at, ${TS('m.created_at')} AS created_at
     FROM mandates m WHERE ${where} ORDER BY m.created_at DESC, m.id DESC LIMIT $3`,
    params,
  );
  return pageOf(rows, q.limit, (last) => timeCursor(last.created_at, last.id));
}

/** A spend decision on a mandate; a declined one with what its currency had spent before it (the approved spend before it recorded the total: the numbers a decline is explained by). */
export type MandateDecision = { transaction_id: string; channel: string; amount_minor: string; currency: string; merchant: string; decision: 'approved' | 'declined'; code: string | null; at: string; spent_before_minor: string | null; position: string };

/** The mandate's spend decisions, newest first; the cursor is a log position. The caller has read the mandate as the tenant's. */
export async function mandateDecisions(ports: Pick<Ports, 'db'>, mandateId: string, q: { before?: string | undefined; limit: number }): Promise<Page<MandateDecision>> {
  const params: unknown[] = [mandateId, q.limit + 1];
  let cursor = '';
  if (q.before && /^[0-9A-Za-z:._-]{1,80}$/.test(q.before)) cursor = ` AND a.position < $${params.push(q.before)}`;
  const { rows } = await ports.db.query<MandateDecision>(
    `SELECT a.transaction_id, a.channel, a.amount_minor::text, a.currency, a.merchant, a.decision, a.code, ${TS('a.at')} AS at, a.position,
       CASE WHEN a.decision = 'declined' THEN coalesce((SELECT b.spent_minor FROM mandate_authorizations b
         WHERE b.mandate_id = a.mandate_id AND b.position < a.position AND b.currency = a.currency AND b.decision = 'approved' ORDER BY b.position DESC LIMIT 1), 0)::text END AS spent_before_minor
     FROM mandate_authorizations a WHERE a.mandate_id = $1${cursor} ORDER BY a.position DESC LIMIT $2`,
    params,
  );
  return pageOf(rows, q.limit, (last) => last.position);
}

export type StatementLine = { bank_transaction_id: string; amount_minor: string; currency: string; credit_debit: string; description: string; booked_at: string };

/** The statement lines a consent imported, newest first. The caller has read the consent as the tenant's. */
export async function consentStatement(ports: Pick<Ports, 'db'>, consentId: string, q: { before?: string | undefined; limit: number }): Promise<Page<StatementLine>> {
  const params: unknown[] = [consentId, q.limit + 1];
  const c = parseTimeCursor(q.before);
  let cursor = '';
  if (c) {
    params.push(c.at, c.id);
    cursor = ' AND (booked_at, bank_transaction_id) < ($3::timestamptz, $4)';
  }
  const { rows } = await ports.db.query<StatementLine>(
    `SELECT bank_transaction_id, amount_minor::text, currency, credit_debit, description, ${TS('booked_at')} AS booked_at
     FROM bank_statement_lines WHERE consent_id = $1${cursor} ORDER BY bank_statement_lines.booked_at DESC, bank_transaction_id DESC LIMIT $2`,
    params,
  );
  return pageOf(rows, q.limit, (last) => timeCursor(last.booked_at, last.bank_transaction_id));
}

export type ChargeLine = { id: string; status: string; kind: string; amount_minor: string; currency: string; txid: string; expires_at: string; created_at: string; settled_at: string | null; end_to_end_id: string | null };

/** The consumer's Pix charges in the project, newest first. */
export async function consumerCharges(ports: Pick<Ports, 'db'>, tenant: Tenant, consumerId: string, q: { before?: string | undefined; limit: number }): Promise<Page<ChargeLine>> {
  const params: unknown[] = [consumerId, tenant.orgId, tenant.projectId, q.limit + 1];
  const cursor = before(params, q.before);
  const { rows } = await ports.db.query<ChargeLine>(
    `SELECT id, status, kind, amount_minor::text, currency, txid, ${TS('expires_at')} AS expires_at, ${TS('created_at')} AS created_at, ${TS('settled_at')} AS settled_at, end_to_end_id
     FROM pix_charges WHERE consumer_id = $1 AND org_id = $2 AND project_id = $3${cursor} ORDER BY pix_charges.created_at DESC, id DESC LIMIT $4`,
    params,
  );
  return pageOf(rows, q.limit, (last) => timeCursor(last.created_at, last.id));
}

export type ReceivementLine = { end_to_end_id: string; received_minor: string; credited_minor: string | null; correlation: string; charge_id: string | null; paid_at: string; received_at: string };

/** The Pix the consumer received in the project, newest first. */
export async function consumerReceivements(ports: Pick<Ports, 'db'>, tenant: Tenant, consumerId: string, q: { before?: string | undefined; limit: number }): Promise<Page<ReceivementLine>> {
  const params: unknown[] = [consumerId, tenant.orgId, tenant.projectId, q.limit + 1];
  const c = parseTimeCursor(q.before);
  let cursor = '';
  if (c) {
    params.push(c.at, c.id);
    cursor = ' AND (received_at, end_to_end_id) < ($5::timestamptz, $6)';
  }
  const { rows } = await ports.db.query<ReceivementLine>(
    `SELECT end_to_end_id, received_minor::text, credited_minor::text, correlation, charge_id, paid_at, ${TS('received_at')} AS received_at
     FROM pix_receivements WHERE consumer_id = $1 AND org_id = $2 AND project_id = $3${cursor} ORDER BY pix_receivements.received_at DESC, end_to_end_id DESC LIMIT $4`,
    params,
  );
  return pageOf(rows, q.limit, (last) => timeCursor(last.received_at, last.end_to_end_id));
}

/** The consumer's Pix keys as last reconciled with the PSP's directory (the API's list asks the PSP first). */
export async function cachedPixKeys(ports: Pick<Ports, 'db'>, consumerId: string): Promise<{ key: string; key_type: string; registered_at: string }[]> {
  const { rows } = await ports.db.query<{ key: string; key_type: string; registered_at: string }>(`SELECT key, key_type, ${TS('registered_at')} AS registered_at FROM pix_keys WHERE consumer_id = $1 ORDER BY pix_keys.registered_at, key LIMIT 100`, [consumerId]);
  return rows;
}
