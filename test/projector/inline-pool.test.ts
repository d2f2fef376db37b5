import t from 'tap';
import { orgDecider, orgStream } from '../../commands/org.ts';
import { getProject, orgProjection } from '../../projections/org.ts';
import { auditStream } from '../../src/audit/chain.ts';
import { generateSigningKey } from '../../src/audit/note.ts';
import { verifyOrgChain } from '../../src/audit/verifier.ts';
import { handleCommand, type CommandContext } from '../../src/eventstore/handler.ts';
import { PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { rebuildProjection } from '../../src/projector/runner.ts';
import { startReadSide, type ReadSide } from '../../src/readside.ts';
import { AUDIT_ORIGIN } from '../../src/runtime.ts';
import { testDatabase } from '../helpers/db.ts';

// An append transaction holds the log-head row and the followers' checkpoint
// rows until it commits, and the asynchronous runners wait for those rows in
// transactions of their own, each on a connection of the pool. So nothing the
// append transaction waits for may need another connection: once the runners
// hold the rest of the pool, that wait would never end (two service instances
// under load did just that: an append waited for the sealer's loop to load a
// chain, the load waited for a connection). On a pool of one connection any
// such wait shows at once; the ledger must still work there.

const { db } = await testDatabase(t, { poolMax: 1 });
const store = await PostgresEventStore.open(db);
const key = generateSigningKey('test-audit');
const sealerOpts = { signingKey: key, origin: AUDIT_ORIGIN, checkpointEveryEntries: 1000, checkpointIntervalMs: 60_000 };
const sides: ReadSide[] = [];
const readSide = async () => {
  const side = await startReadSide(db, store, sealerOpts, undefined, { reactors: false });
  sides.push(side);
  return side;
};
t.teardown(async () => {
  for (const side of sides) await side.stop();
  await store.close();
});

let clock = Date.parse('2026-11-21T12:00:00.000Z');
const ctx = (orgId: string): CommandContext => ({ orgId, projectId: null, actor: { kind: 'user', id: 'usr_pool' }, requestId: null, now: () => new Date((clock += 1000)) });
const org = 'org_pool_of_one';
const createProject = (id: string) => handleCommand(store, orgDecider, orgStream(org), { type: 'create_project', projectId: id, name: id, slug: id.replace(/_/g, '-'), environment: 'test', settings: {} }, ctx(org));

/** Settles `p`, or fails the test after `ms` (a wait that is stuck, not slow: a deadlock never settles). */
const within = <T>(p: Promise<T>, ms: number, what: string): Promise<T> =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what}: not settled after ${ms} ms`)), ms).unref())]);

t.test('appends, inline followers and the read side on a pool of one connection', async (t) => {
  const side = await readSide();
  await within(handleCommand(store, orgDecider, orgStream(org), { type: 'create_org', orgId: org, name: 'Pool', defaultProjectId: 'prj_pool_default', owner: { userId: 'usr_pool', email: 'p@example.com', displayName: null } }, ctx(org)), 60_000, 'create_org');
  const r = await within(createProject('prj_pool_1'), 60_000, 'create_project');
  t.ok(await side.waitFor(r.lastPosition!, 60_000), 'the read side reached the append');
  t.match(await getProject(db, org, 'prj_pool_1'), { id: 'prj_pool_1' });
});

t.test("an append while the sealer's own loop is loading the same chain", async (t) => {
  // A restarted read side: its sealer has no chain cached.
  await sides.shift()!.stop();
  const side = await readSide();
  const [sealed] = await store.readStream(orgStream(org), { maxCount: 1 });
  // The sealer's loop starts loading the chain (as it does for events it has not seen sealed)...
  const loading = side.sealer.seal([sealed!]);
  // ...while an append for the same organization seals inline.
  const appended = createProject('prj_pool_2');
  const [, r] = await within(Promise.all([loading, appended]), 60_000, 'the append and the load');
  t.ok(await side.waitFor(r.lastPosition!, 60_000), 'the read side reached the append');
  t.match(await getProject(db, org, 'prj_pool_2'), { id: 'prj_pool_2' });
  const business = (await store.readStream(orgStream(org))).length;
  const entries = await store.readStream(auditStream(org));
  t.equal(entries.length, business, 'one entry per event, none twice');
  const report = await verifyOrgChain(store, org, key, AUDIT_ORIGIN);
  t.ok(report.ok, JSON.stringify(report.problems?.slice(0, 3)));
});

t.test("a rebuild's swap reads the log's tail through its own transaction", async (t) => {
  // The swap holds the projection's checkpoint row (which the runner, and an
  // append with the projection inline, wait for) while it reads the log's
  // tail: on the pool's one connection, a read that needs another one would
  // never start.
  const side = sides[sides.length - 1]!;
  const before = await getProject(db, org, 'prj_pool_2');
  const done = await within(rebuildProjection(db, store, orgProjection), 60_000, 'the rebuild');
  t.equal(done.position, await store.headPosition(), 'the rebuilt tables stand at the head');
  t.same(await getProject(db, org, 'prj_pool_2'), before, 'the same rows as the live projection wrote');
  const r = await within(createProject('prj_pool_3'), 60_000, 'an append after the swap');
  t.ok(await side.waitFor(r.lastPosition!, 60_000), 'the read side reached the append');
  t.match(await getProject(db, org, 'prj_pool_3'), { id: 'prj_pool_3' });
});
