import path from 'node:path';
import type { Config } from './config.ts';
import { type EventStore, openEventStore } from './eventstore/index.ts';
import { openDb, type Db } from './postgres/db.ts';
import { ensureDatabase, startEmbeddedPostgres, type EmbeddedServer } from './postgres/embedded.ts';

// The process's long-lived parts: its Postgres (embedded unless DATABASE_URL is
// given), the read-side database handle and the event store. Built once by the
// server and by the CLI; closed in reverse order.

export type Runtime = {
  config: Config;
  db: Db;
  store: EventStore;
  close(): Promise<void>;
};

export const APP_DATABASE = 'ledger';

export async function openRuntime(config: Config, log: (line: string) => void = () => {}): Promise<Runtime> {
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
    return {
      config,
      db,
      store,
      async close() {
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
