import type { Db } from '../postgres/db.ts';
import type { EventStore } from './port.ts';
import { PostgresEventStore } from './postgres.ts';

export * from './port.ts';

/** EventStoreDB when `esdbUrl` is given, else the Postgres log in `db`. */
/** `maxAppendBytes`: the largest append accepted, the same on either store (default APPEND_MAX_BYTES). */
export async function openEventStore(opts: { esdbUrl: string | undefined; db: Db; listen?: boolean; maxAppendBytes?: number }): Promise<EventStore> {
  if (opts.esdbUrl) {
    // Loaded only when selected, so the embedded default never loads the gRPC client.
    const { EventStoreDbStore } = await import('./eventstoredb.ts');
    return EventStoreDbStore.open(opts.esdbUrl, opts.maxAppendBytes !== undefined ? { maxAppendBytes: opts.maxAppendBytes } : {});
  }
  return PostgresEventStore.open(opts.db, { listen: opts.listen ?? true, ...(opts.maxAppendBytes !== undefined ? { maxAppendBytes: opts.maxAppendBytes } : {}) });
}
