import os from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { openEventStore } from '../eventstore/index.ts';
import { openDb } from '../postgres/db.ts';
import { AuditVerifier } from './health.ts';
import type { VerifierThreadSpec } from './verifier-thread.ts';

// The continuous audit verifier on its own thread (src/audit/verifier-thread.ts):
// its own connections and its own view of the event store, the same schedule
// and code as in the service's thread.

const spec = workerData as VerifierThreadSpec;
// The lowest CPU priority, for this thread only (on Linux a thread's nice value
// is its own): verification uses what the service leaves idle and falls behind
// while the machine is saturated, instead of slowing acknowledgements; its
// health shows how far behind it is. Where a priority cannot be set, it runs as is.
try {
  os.setPriority(19);
} catch {}
const db = openDb(spec.dbUrl, { max: 2, applicationName: 'ledger-verifier' });
// It reads on a timer and never waits for new events: no LISTEN connection woken by every commit.
const store = await openEventStore({ esdbUrl: spec.esdbUrl, db, listen: false });
// Each pass's result goes to the service's thread, whose counter /metrics serves (this thread's registry would be its own).
const verifier = new AuditVerifier(db, store, { name: spec.keyName, publicKey: spec.publicKey }, spec.origin, undefined, (result) => parentPort!.postMessage({ pass: result }));
verifier.start();
parentPort!.postMessage('started');
parentPort!.once('message', async () => {
  await verifier.stop();
  await store.close().catch(() => {});
  await db.close().catch(() => {});
  parentPort!.postMessage('stopped');
});
