import { parseEvent } from '../events/index.ts';
import type { Projection } from '../src/projector/projection.ts';

// Read model of consumers (titulars).

export const consumerProjection: Projection = {
  name: 'consumer',
  version: 2,
  tables: {
    consumers: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY,
      org_id text NOT NULL,
      project_id text NOT NULL,
      display_name text,
      document text,
      document_source text,
      document_verified_at timestamptz,
      person_type text,
      tax_type text,
      status text NOT NULL,
      metadata jsonb NOT NULL,
      created_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (org_id, project_id, created_at);
    CREATE INDEX ON ${t} (org_id, created_at, id)`,
  },
  eventTypes: new Set(['consumer.created', 'consumer.updated']),
  async apply(tx, event, t) {
    const e = parseEvent(event.type, event.data);
    const pos = event.position;
    if (e.type === 'consumer.created') {
      await tx.query(
        `INSERT INTO ${t.consumers} (id, org_id, project_id, display_name, status, metadata, created_at, position) VALUES ($1, $2, $3, $4, 'unverified', $5, $6, $7) ON CONFLICT (id) DO NOTHING`,
        [e.data.consumer_id, e.data.org_id, e.data.project_id, e.data.display_name, JSON.stringify(e.data.metadata), e.data.created_at, pos],
      );
    } else if (e.type === 'consumer.updated') {
      const d = e.data;
      await tx.query(
        `UPDATE ${t.consumers} SET
           display_name = CASE WHEN $2 THEN $3 ELSE display_name END,
           metadata = coalesce($4::jsonb, metadata),
           tax_type = coalesce($5, tax_type),
           position = $6
         WHERE id = $1 AND position < $6`,
        [d.consumer_id, d.display_name !== undefined, d.display_name ?? null, d.metadata !== undefined ? JSON.stringify(d.metadata) : null, d.tax_type ?? null, pos],
      );
    }
  },
};

/** One mandate counted in a consumer's wallet: active or paused, not past its expiry. */
export type WalletMandate = { id: string; currency: string; cap_minor: bigint; spent_minor: bigint };
/** One funding source of a consumer (a partner account, a linked wallet), in one currency. */
export type WalletFundingSource = { id: string; currency: string };
export type WalletRow = { currency: string; authorized_minor: bigint; spent_minor: bigint; available_minor: bigint; funding_source_ids: string[]; mandate_ids: string[] };

/**
 * The wallet's rows, one per currency that has a counted mandate or a funding
 * source (a funding source without a mandate still gets its row, at zero),
 * each carrying the ids of its own mandates and funding sources, in input order;
 * rows sorted by currency.
 */
export function walletRows(mandates: WalletMandate[], fundingSources: WalletFundingSource[]): WalletRow[] {
  const rows = new Map<string, WalletRow>();
  const row = (currency: string) => {
    let r = rows.get(currency);
    if (!r) rows.set(currency, (r = { currency, authorized_minor: 0n, spent_minor: 0n, available_minor: 0n, funding_source_ids: [], mandate_ids: [] }));
    return r;
  };
  for (const m of mandates) {
    const r = row(m.currency);
    r.authorized_minor += m.cap_minor;
    r.spent_minor += m.spent_minor;
    r.available_minor = r.authorized_minor - r.spent_minor;
    r.mandate_ids.push(m.id);
  }
  for (const f of fundingSources) row(f.currency).funding_source_ids.push(f.id);
  return [...rows.values()].sort((a, b) => (a.currency < b.currency ? -1 : a.currency > b.currency ? 1 : 0));
}
