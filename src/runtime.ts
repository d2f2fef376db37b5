import path from 'node:path';
import type { Config } from './config.ts';
import { type EventStore, openEventStore } from './eventstore/index.ts';
import { openDb, type Db } from './postgres/db.ts';
import { ensureDatabase, startEmbeddedPostgres, type EmbeddedServer } from './postgres/embedded.ts';
import { loadAuditSigningKey } from './audit/keys.ts';
import type { SigningKey } from './audit/note.ts';
import { startReadSide, type ReadSide } from './readside.ts';

// The process's long-lived parts: its Postgres (embedded unless DATABASE_URL is
// given), the read-side database handle and the event store. Built once by the
// server and by the CLI; closed in reverse order.

export type Runtime = {
  config: Config;
  db: Db;
  store: EventStore;
  auditKey: SigningKey;
  /** Absent when opened with `followers: false` (one-shot CLI commands). */
  readSide: ReadSide | undefined;
  close(): Promise<void>;
};

export const AUDIT_ORIGIN = 'agent-ledger/audit';

export const APP_DATABASE = 'ledger';

export async function openRuntime(config: Config, log: (line: string) => void = () => {}, opts: { followers?: boolean } = {}): Promise<Runtime> {
  let embedded: EmbeddedServer | undefined;
  let url = config.databaseUrl;
  if (!url) {
    embedded = await startEmbeddedPostgres({ dataDir: path.join(config.dataDir), log: (l) => log(`[postgres] ${l}`) });
    await ensureDatabase(embedded.adminUrl, APP_DATABASE);
    url = embedded.urlFor(APP_DATABASE);
  }
  const db = openDb(url);
  try {
    const store = await openEventStore({ esdbUrl: config.esdbUrl, db });
    const auditKey = await loadAuditSigningKey({ seedBase64: config.auditSigningKey, dataDir: config.dataDir });
    const readSide = opts.followers === false ? undefined : await startReadSide(db, store, { signingKey: auditKey, origin: AUDIT_ORIGIN });
    return {
      config,
      db,
      store,
      auditKey,
      readSide,
      async close() {
        await readSide?.stop().catch(() => {});
        await store.close().catch(() => {});
        await db.close().catch(() => {});
        await embedded?.stop();
      },
    };
  } catch (err) {
    await db.close().catch(() => {});
    await embedded?.stop();
    throw err;
  }
}
