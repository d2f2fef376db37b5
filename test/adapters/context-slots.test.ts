import t from 'tap';
import { ContextSlots, NoSlot } from '../../src/adapters/browser/slots.ts';

// The browser worker's contexts as a fair resource (issue 38), without a
// browser: the total and each organization's share, the queue of callers that
// wait (granted to the organization holding the fewest, the longest waiting
// among equals), a wait that is given up, and the worker closing.

const settled = async <T>(p: Promise<T>) => {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return done;
};

t.test('an organization gets at most its share; the others still get theirs', async (t) => {
  const slots = new ContextSlots({ maxContexts: 4, maxContextsPerOrg: 2 });
  const a1 = await slots.acquire('org_a');
  await slots.acquire('org_a');
  await t.rejects(slots.acquire('org_a'), NoSlot, "a third context for org_a is refused: its share is 2");
  await t.rejects(slots.acquire('org_a'), { message: /this organization holds 2 of its 2 browser contexts/ });
  t.equal(slots.activeOf('org_a'), 2);
  await slots.acquire('org_b');
  await slots.acquire('org_b');
  t.equal(slots.active, 4);
  await t.rejects(slots.acquire('org_c'), { message: /the browser worker has 4 of 4 contexts open/ }, 'the total holds too');
  a1();
  a1(); // released once only
  t.equal(slots.activeOf('org_a'), 1);
  await slots.acquire('org_c');
  t.equal(slots.active, 4);
});

t.test('a share larger than the whole is the whole; unattributed opens count toward the total only', async (t) => {
  const slots = new ContextSlots({ maxContexts: 2, maxContextsPerOrg: 5 });
  await slots.acquire(undefined);
  await slots.acquire('org_a');
  await t.rejects(slots.acquire('org_a'), NoSlot);
  t.equal(slots.active, 2);
});

t.test('waiters: queued at once (onQueued), granted on release to the organization holding the fewest, the earliest among equals', async (t) => {
  const slots = new ContextSlots({ maxContexts: 3, maxContextsPerOrg: 2 });
  const releases = [await slots.acquire('org_a'), await slots.acquire('org_a'), await slots.acquire('org_b')];
  const signal = new AbortController().signal;
  const queuedOrder: string[] = [];
  const wait = (who: string, org: string) => slots.acquire(org, { signal, onQueued: () => queuedOrder.push(who) }).then((release) => ({ who, release }));
  const aWaits = wait('a', 'org_a');
  const bWaits = wait('b', 'org_b');
  const cWaits = wait('c', 'org_c');
  const c2Waits = wait('c2', 'org_c');
  t.same(queuedOrder, ['a', 'b', 'c', 'c2'], 'each waiter learns it is queued, in order');
  t.equal(slots.waiting, 4);
  releases[2]!(); // org_b's context frees: org_c holds none, org_b none, org_a two (at its share)
  const first = await Promise.race([aWaits, bWaits, cWaits, c2Waits]);
  t.equal(first.who, 'b', 'org_b and org_c both hold none: the earliest of them (b) gets it');
  t.notOk(await settled(aWaits), 'org_a, at its share, is not served');
  releases[0]!(); // org_a drops to one: org_c holds none, so c goes first
  t.equal((await cWaits).who, 'c');
  t.notOk(await settled(aWaits), 'org_a (one held) waits behind the fewest-held organization');
  t.notOk(await settled(c2Waits));
  first.release();
  // Now org_a holds one, org_b none (b released), org_c one: nobody waits from org_b, so a and c2 are tied at one; a came first.
  t.equal((await aWaits).who, 'a');
  t.equal(slots.waiting, 1);
  t.equal(slots.activeOf('org_a'), 2);
});

t.test('a wait given up is refused with NoSlot and leaves the queue; a closing worker refuses every waiter', async (t) => {
  const slots = new ContextSlots({ maxContexts: 1, maxContextsPerOrg: 1 });
  const held = await slots.acquire('org_a');
  const giveUp = new AbortController();
  const waiting = slots.acquire('org_b', { signal: giveUp.signal });
  t.equal(slots.waiting, 1);
  giveUp.abort();
  await t.rejects(waiting, NoSlot);
  t.equal(slots.waiting, 0, 'it left the queue');
  const aborted = new AbortController();
  aborted.abort();
  await t.rejects(slots.acquire('org_b', { signal: aborted.signal }), NoSlot, 'an already given-up wait is refused at once');
  const last = slots.acquire('org_c', { signal: new AbortController().signal });
  slots.failWaiting(new Error('closed'));
  await t.rejects(last, { message: 'closed' });
  held();
  t.equal(slots.active, 0);
});
