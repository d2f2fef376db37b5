import type { Test } from 'tap';
import { generateSigningKey, type SigningKey } from '../../src/audit/note.ts';
import { handleCommand, type CommandContext, type Decider, type HandleOptions } from '../../src/eventstore/handler.ts';
import { PostgresEventStore } from '../../src/eventstore/postgres.ts';
import type { EventStore } from '../../src/eventstore/port.ts';
import type { EsdbDouble } from '../../tools/esdb-double/server.ts';
import type { Db } from '../../src/postgres/db.ts';
import { startReadSide, type ReadSide } from '../../src/readside.ts';
import { AUDIT_ORIGIN } from '../../src/runtime.ts';
import { testDatabase } from './db.ts';

// A whole ledger on a fresh database: the Postgres log, the projections and
// the audit sealer, as the service runs them.

export type TestLedger = {
  url: string;
  db: Db;
  store: EventStore;
  /** The EventStoreDB double behind `store` when the ledger runs on EventStoreDB without ESDB_URL. */
  esdb?: EsdbDouble;
  key: SigningKey;
  readSide: ReadSide;
  origin: string;
  ctx(orgId: string, over?: Partial<CommandContext>): CommandContext;
  run<S, C>(decider: Decider<S, C>, stream: string, command: C, ctx: CommandContext, opts?: HandleOptions): ReturnType<typeof handleCommand<S, C>>;
  /** Waits until the read side has processed everything appended so far. */
  settle(): Promise<void>;
};

/** The audit chain's format a test ledger seals in unless told: the service's default, 2; AUDIT_FORMAT=1 runs the suite on version 1. */
export const testAuditFormat = (): 1 | 2 => (process.env.AUDIT_FORMAT === '1' ? 1 : 2);

/** `store: 'esdb'` puts the log on EventStoreDB: the server at ESDB_URL, else the double on loopback. */
export async function testLedger(t: Test, opts: { checkpointEveryEntries?: number; checkpointIntervalMs?: number; now?: () => Date; store?: 'postgres' | 'esdb'; auditFormat?: 1 | 2 } = {}): Promise<TestLedger> {
  const { url, db } = await testDatabase(t, { schema: true });
  let esdb: EsdbDouble | undefined;
  let store: EventStore;
  if (opts.store === 'esdb') {
    // Loaded here: the gRPC client and the double cost every other file ~0.25 s of CPU to import.
    const [{ EventStoreDbStore }, { EsdbDouble }] = await Promise.all([import('../../src/eventstore/eventstoredb.ts'), import('../../tools/esdb-double/server.ts')]);
    const target = process.env.ESDB_URL ?? (esdb = await EsdbDouble.start()).url;
    store = await EventStoreDbStore.open(target);
  } else {
    store = await PostgresEventStore.open(db);
  }
  const key = generateSigningKey('test-audit');
  const readSide = await startReadSide(
    db,
    store,
    { signingKey: key, origin: AUDIT_ORIGIN, checkpointEveryEntries: opts.checkpointEveryEntries ?? 4, checkpointIntervalMs: opts.checkpointIntervalMs ?? 60_000, format: opts.auditFormat ?? testAuditFormat() },
    undefined,
    { reactors: false, ...(opts.now ? { now: opts.now } : {}) },
  );
  t.teardown(async () => {
    await readSide.stop();
    await store.close();
    await esdb?.stop();
  });
  let clock = Date.parse('2026-11-21T12:00:00.000Z');
  const ledger: TestLedger = {
    url,
    db,
    store,
    ...(esdb ? { esdb } : {}),
    key,
    readSide,
    origin: AUDIT_ORIGIN,
    ctx: (orgId, over = {}) => ({
      orgId,
      projectId: null,
      actor: { kind: 'user', id: 'usr_test' },
      requestId: null,
      now: () => new Date((clock += 1000)),
      ...over,
    }),
    run: (decider, stream, command, ctx, o) => handleCommand(store, decider, stream, command, ctx, o),
    async settle() {
      const head = await store.headPosition();
      if (!(await readSide.waitFor(head, 60_000))) {
        // Which follower is behind, and why: what a failing test needs to say.
        const { rows } = await db.query<{ name: string; position: string; status: string; error: string | null }>(`SELECT name, position, status, error FROM checkpoints WHERE position < $1 OR error IS NOT NULL ORDER BY checkpoints.name`, [head]);
        throw new Error(`read side did not catch up to ${head}: ${JSON.stringify(rows)}; sealer: ${readSide.sealer.lastError ?? 'no error'}`);
      }
    },
  };
  return ledger;
}
