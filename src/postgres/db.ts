import pg from 'pg';
import { PG_POOL_MAX } from '../limits.ts';

// The one place that builds node-postgres pools. Everything else talks to a
// `Db`: a query function, transactions, and LISTEN channels that re-listen by
// themselves after a reconnect.

export type Row = Record<string, unknown>;
export type QueryResult<R extends Row = Row> = { rows: R[]; rowCount: number };

/**
 * `name` makes it a prepared statement, planned once per connection.
 * `rawText` answers every column as the text PostgreSQL sent (json and
 * timestamps not parsed), for a reader that decodes each row only when it
 * reaches it (`parseTimestamptz` is the parser the default answer uses).
 */
export type QueryOptions = { name?: string; rawText?: boolean };

export interface Queryable {
  query<R extends Row = Row>(text: string, params?: readonly unknown[], opts?: QueryOptions): Promise<QueryResult<R>>;
}

/** Every column as its text. */
const RAW_TEXT = { getTypeParser: () => (text: string) => text };

/** A query's configuration for node-postgres. */
function queryConfig(text: string, params: readonly unknown[] | undefined, o: QueryOptions | undefined): pg.QueryConfig {
  return { text, values: params as unknown[] | undefined, ...(o?.name ? { name: o.name } : {}), ...(o?.rawText ? { types: RAW_TEXT as unknown as pg.CustomTypesConfig } : {}) };
}

/** The parser node-postgres applies to a timestamptz column by default (so a raw row decodes to the same Date). */
export const parseTimestamptz = pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ, 'text') as (text: string) => Date;

/** A timestamptz as PostgreSQL writes it in a UTC session: '2026-11-21 12:34:56.123456+00'. */
const UTC_TIMESTAMPTZ = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?\+00$/;

/**
 * `parseTimestamptz(text).toISOString()`, without the Date when the text is
 * in UTC: the fraction cut to milliseconds, as the Date's truncation does
 * (all 10^6 fractions checked to agree). Any other text takes the parser.
 */
export function timestamptzIso(text: string): string {
  const m = UTC_TIMESTAMPTZ.exec(text);
  if (!m) return parseTimestamptz(text).toISOString();
  return `${m[1]}T${m[2]}.${(m[3] ?? '').padEnd(3, '0').slice(0, 3)}Z`;
}

/** A transaction's connection. */
export type Transaction = Queryable;

/** node-postgres (8.23+) sends a client's queries without waiting for earlier answers while `pipeline` is set. */
type PipelineSwitch = { pipeline: boolean };

/** A COMMIT the server answered with ROLLBACK: a statement of the transaction had failed, so nothing of it took effect. */
export class RolledBack extends Error {
  constructor() {
    super('the transaction was rolled back at COMMIT: one of its statements had failed');
  }
}

/** Whether an error is PostgreSQL's answer to a statement (so the statement, or its transaction, did not take effect). */
export function isServerError(err: unknown): boolean {
  return err instanceof pg.DatabaseError || err instanceof RolledBack;
}

export interface Db extends Queryable {
  /**
   * Runs `fn` in one transaction on one connection; rolls back if it throws.
   * `waitForFlush: false` commits without waiting for the WAL flush (only for
   * work a later synchronous commit makes durable, or that may be lost).
   */
  transaction<T>(fn: (tx: Transaction) => Promise<T>, opts?: { isolation?: 'read committed' | 'repeatable read' | 'serializable'; waitForFlush?: boolean }): Promise<T>;
  /**
   * Transactions one after another on one connection, each issued as soon as
   * the one before has issued its COMMIT, not once that COMMIT is answered:
   * the connection runs them in order, so each sees the ones before it as
   * committed. Each answers once its COMMIT is answered (RolledBack if a
   * statement of it failed). For bulk writes whose next transaction needs no
   * answer of the one before (a rebuild's pages); `close` waits for them all.
   */
  sequence(): TxSequence;
  /** Subscribes to a NOTIFY channel; the returned function stops listening. */
  listen(channel: string, onPayload: (payload: string) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
  readonly url: string;
}

export type TxSequence = {
  /** `fn` issues the transaction's statements; its COMMIT goes out when `fn` settles. */
  transaction<T>(fn: (tx: Transaction) => Promise<T>, opts?: { waitForFlush?: boolean }): Promise<T>;
  close(): Promise<void>;
};

/** A transaction's statements on a pipelined connection, refused once its COMMIT is issued (they would run after it, outside the transaction). */
function pipelinedTx(client: pg.PoolClient, committing: () => boolean): Transaction {
  return {
    async query<R extends Row = Row>(text: string, params?: readonly unknown[], q?: QueryOptions) {
      if (committing()) throw new Error(`statement issued after its transaction's COMMIT, not run: ${text.slice(0, 80)}`);
      const res = await client.query(queryConfig(text, params, q));
      return { rows: res.rows as R[], rowCount: res.rowCount ?? 0 };
    },
  };
}

/** A transaction's BEGIN; without waiting for the WAL flush at COMMIT when asked (the setting is local to the transaction). */
function beginText(o?: { isolation?: string; waitForFlush?: boolean }): string {
  const begin = o?.isolation ? `BEGIN ISOLATION LEVEL ${o.isolation.toUpperCase()}` : 'BEGIN';
  return o?.waitForFlush === false ? `${begin}; SET LOCAL synchronous_commit = off` : begin;
}

export function openDb(url: string, opts: { max?: number; applicationName?: string } = {}): Db {
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.max ?? PG_POOL_MAX,
    application_name: opts.applicationName ?? 'ledger',
    idleTimeoutMillis: 30_000,
  });
  // An idle client's error (server restart, network) must not crash the process;
  // the next checkout opens a fresh connection.
  pool.on('error', () => {});
  // A connection the server ends (a failover, pg_terminate_backend) can emit
  // 'error' more than once: the pool's query listens for one ('once'), and a
  // second with no listener would end the process. The failing query and the
  // pool already carry the error; this listener only keeps the process up.
  pool.on('connect', (client) => client.on('error', () => {}));

  const listeners = new Set<{ stop: () => Promise<void> }>();

  const db: Db = {
    url,
    async query<R extends Row = Row>(text: string, params?: readonly unknown[], o?: QueryOptions) {
      const res = await pool.query(queryConfig(text, params, o));
      return { rows: res.rows as R[], rowCount: res.rowCount ?? 0 };
    },
    async transaction<T>(fn: (tx: Transaction) => Promise<T>, o?: { isolation?: string; waitForFlush?: boolean }) {
      const client = await pool.connect();
      let broken = false;
      // A connection lost while checked out is also emitted as an 'error' event,
      // which with no listener would end the process: the failing query already
      // carries the error, so the listener only marks the client broken.
      const onError = () => {
        broken = true;
      };
      client.on('error', onError);
      try {
        // Pipelined: a statement goes out as soon as it is issued, without waiting
        // for the answers of those before it (they are answered in order, and a
        // failure fails every later one in the transaction, as it would one by
        // one). BEGIN travels with the transaction's first statements, and
        // statements issued together (independent writes) share a round trip.
        (client as PipelineSwitch).pipeline = true;
        const begun = client.query(beginText(o));
        // Its failure is the next statement's failure too; this one is observed there.
        begun.catch(() => {});
        // Once the COMMIT is issued, a statement would run after it, outside the
        // transaction: refused instead (a caller that issues statements only
        // after waiting for answers must be waited for before the COMMIT).
        let committing = false;
        const tx = pipelinedTx(client, () => committing);
        const out = await fn(tx);
        // Statements still in flight go before it (pipelined). One that failed
        // without its caller seeing it leaves the transaction aborted: COMMIT
        // then rolls back, and says so.
        committing = true;
        const done = await client.query('COMMIT');
        if (done.command !== 'COMMIT') throw new RolledBack();
        return out;
      } catch (err) {
        try {
          await client.query('ROLLBACK');
        } catch {
          broken = true;
        }
        throw err;
      } finally {
        (client as PipelineSwitch).pipeline = false;
        client.off('error', onError);
        client.release(broken);
      }
    },
    sequence() {
      // The connection is held while a transaction of the sequence is unanswered, and given back
      // whenever none is: a sequence never keeps from the rest of the pool (a pool of one included)
      // a connection it is not using, and a transaction after a pause sees the ones before it
      // committed, on whichever connection.
      let client: pg.PoolClient | undefined;
      let broken = false;
      const onError = () => {
        broken = true;
      };
      let pending = 0;
      const acquire = async () => {
        if (!client) {
          client = await pool.connect();
          broken = false;
          client.on('error', onError);
          (client as PipelineSwitch).pipeline = true;
        }
        return client;
      };
      const releaseIfIdle = () => {
        if (pending > 0 || !client) return;
        const c = client;
        client = undefined;
        (c as PipelineSwitch).pipeline = false;
        c.off('error', onError);
        c.release(broken);
      };
      // Settled once the last transaction issued its COMMIT (or ROLLBACK): the next one's BEGIN goes after it.
      let issued: Promise<unknown> = Promise.resolve();
      // Settled once every transaction is answered.
      let answered: Promise<unknown> = Promise.resolve();
      return {
        transaction<T>(fn: (tx: Transaction) => Promise<T>, o?: { waitForFlush?: boolean }): Promise<T> {
          pending++;
          const run = issued.then(async () => {
            const c = await acquire();
            const begun = c.query(beginText(o));
            begun.catch(() => {});
            let committing = false;
            const tx = pipelinedTx(c, () => committing);
            try {
              const out = await fn(tx);
              committing = true;
              return { out, end: c.query('COMMIT') };
            } catch (err) {
              committing = true;
              const end = c.query('ROLLBACK');
              end.catch(() => {
                broken = true;
              });
              return { err, end };
            }
          });
          issued = run.catch(() => {});
          const done = run
            .then(async (r) => {
              if ('err' in r) {
                // The caller's failure, whatever its ROLLBACK answers.
                await r.end.catch(() => {});
                throw r.err;
              }
              const end = await r.end;
              if (end.command !== 'COMMIT') throw new RolledBack();
              return r.out;
            })
            .finally(() => {
              pending--;
              releaseIfIdle();
            });
          answered = Promise.allSettled([answered, done]);
          return done;
        },
        async close() {
          await answered;
          releaseIfIdle();
        },
      };
    },
    async listen(channel, onPayload) {
      if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`invalid channel: ${channel}`);
      let stopped = false;
      let client: pg.Client | undefined;
      const connect = async (): Promise<void> => {
        while (!stopped) {
          const c = new pg.Client({ connectionString: url, application_name: 'ledger-listen' });
          c.on('notification', (n) => {
            if (n.channel === channel) onPayload(n.payload ?? '');
          });
          c.on('error', () => {
            // Reconnect and LISTEN again; subscribers poll meanwhile.
            if (client === c) client = undefined;
            c.end().catch(() => {});
            if (!stopped) setTimeout(() => void connect(), 250).unref();
          });
          try {
            await c.connect();
            await c.query(`LISTEN ${channel}`);
            client = c;
            // A notification may have been missed while disconnected: wake once.
            onPayload('');
            return;
          } catch {
            await c.end().catch(() => {});
            await new Promise((r) => setTimeout(r, 250));
          }
        }
      };
      await connect();
      const handle = {
        stop: async () => {
          stopped = true;
          listeners.delete(handle);
          await client?.end().catch(() => {});
        },
      };
      listeners.add(handle);
      return handle.stop;
    },
    async close() {
      await Promise.all([...listeners].map((l) => l.stop()));
      await pool.end();
    },
  };
  return db;
}
