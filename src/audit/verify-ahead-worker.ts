import { parentPort, workerData } from 'node:worker_threads';
import { PostgresEventStore } from '../eventstore/postgres.ts';
import { openDb } from '../postgres/db.ts';
import { AHEAD, HELPER, precheckRange } from './verify-ahead.ts';

// The helper of a walk (src/audit/verify-ahead.ts): takes the lowest stretch
// of the log nobody has taken, at most a few ahead of the one the walk waits
// for, prechecks the organization's entries in it and answers them; ends
// when none is left.

const { dbUrl, orgId } = workerData as { dbUrl: string; orgId: string };
/** Node has it (ES2024); this project's TypeScript library is ES2023. */
const waitAsync = (Atomics as unknown as { waitAsync(a: Int32Array, i: number, v: number): { async: boolean; value: Promise<string> | string } }).waitAsync;
const db = openDb(dbUrl, { max: 1, applicationName: 'ledger-verify-ahead' });
const store = PostgresEventStore.reader(db);
// Its work, once the walk reaches the linked tail (a walk that never does ends this thread).
const { bounds, states } = await new Promise<{ bounds: [bigint, bigint][]; states: Int32Array }>((resolve) => parentPort!.once('message', resolve));
try {
  for (let j = 0; j < bounds.length; ) {
    if (Atomics.load(states, 1 + j) !== 0) {
      j++;
      continue;
    }
    const at = Atomics.load(states, 0);
    if (j > at + AHEAD) {
      // Too far ahead of the walk: wait until it moves.
      const w = waitAsync(states, 0, at);
      if (w.async) await w.value;
      continue;
    }
    if (Atomics.compareExchange(states, 1 + j, 0, HELPER) !== 0) continue;
    try {
      parentPort!.postMessage({ chunk: j, pres: await precheckRange(store, orgId, ...bounds[j]!) });
    } catch (err) {
      parentPort!.postMessage({ chunk: j, error: (err as Error).message });
    }
    j++;
  }
} finally {
  await store.close().catch(() => {});
  await db.close().catch(() => {});
}
