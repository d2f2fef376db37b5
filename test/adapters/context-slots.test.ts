import t from 'tap';
import { ContextSlots, NoSlot, type SharedHoldings } from '../../src/adapters/browser/slots.ts';

// The browser worker's contexts as a fair, work-conserving resource (issues 38
// and 61), without a browser: an organization alone may use every context;
// its share is what it is guaranteed when others want contexts (a freed
// context goes to an organization under its share first; an unused context
// above an organization's share is taken back for one under its share),
// counted across instances; the queue of callers that wait, a wait given up,
// and the worker closing.

const settled = async <T>(p: Promise<T>) => {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 20; i++) await Promise.resolve();
  return done;
};
const forever = () => ({ signal: new AbortController().signal });

t.test('alone, an organization uses every context; the total holds', async (t) => {
  const slots = new ContextSlots({ maxContexts: 4, maxContextsPerOrg: 2 });
  const leases = await Promise.all([1, 2, 3, 4].map(() => slots.acquire('org_a')));
  t.equal(slots.activeOf('org_a'), 4, 'four of four, though its share is two: nobody else wanted one');
  const refused = await slots.acquire('org_b').then(
    () => undefined,
    (err: unknown) => err,
  );
  t.ok(refused instanceof NoSlot, 'a fifth context is refused to a caller that does not wait');
  t.match((refused as NoSlot).message, /the browser worker has 4 of 4 contexts open/);
  t.match((refused as NoSlot).state, { held: 0, share: 2, maxContexts: 4, active: 4 });
  leases[0]!();
  leases[0]!(); // released once only
  t.equal(slots.activeOf('org_a'), 3);
  await slots.acquire('org_b');
  t.equal(slots.active, 4);
});

t.test('a freed context goes to an organization under its share before one over it, then to the fewest held, the earliest among equals', async (t) => {
  const slots = new ContextSlots({ maxContexts: 3, maxContextsPerOrg: 1 });
  const a = [await slots.acquire('org_a'), await slots.acquire('org_a'), await slots.acquire('org_b')];
  const queuedOrder: string[] = [];
  const wait = (who: string, org: string) => slots.acquire(org, { ...forever(), onQueued: () => queuedOrder.push(who) }).then((release) => ({ who, release }));
  const aMore = wait('a', 'org_a'); // org_a holds two: over its share of one
  const cFirst = wait('c', 'org_c');
  const cSecond = wait('c2', 'org_c');
  t.same(queuedOrder, ['a', 'c', 'c2'], 'each waiter learns it is queued, in order');
  t.equal(slots.waiting, 3);
  a[0]!(); // org_a frees one: org_c (none held, under its share) gets it though org_a asked first
  t.equal((await cFirst).who, 'c');
  t.notOk(await settled(aMore), 'org_a, over its share, waits while org_c was under its share');
  a[2]!(); // org_b frees one: org_a holds one (at its share), org_c one (at its share): fewest held ties, org_a asked first
  t.equal((await aMore).who, 'a');
  t.notOk(await settled(cSecond));
  t.equal(slots.waiting, 1);
});

t.test('an unused context above its organization share is taken back for an organization under its share; one in use is not', async (t) => {
  const slots = new ContextSlots({ maxContexts: 4, maxContextsPerOrg: 2 });
  const reclaimed: number[] = [];
  const leases = await Promise.all([0, 1, 2, 3].map(() => slots.acquire('org_a')));
  // Contexts 0 and 1 are watched (in use); 2 and 3 nobody watches: reclaiming closes them (the holder releases).
  leases.forEach((l, i) => {
    if (i >= 2)
      l.reclaimable(async () => {
        reclaimed.push(i);
        l();
      });
  });
  const b1 = await slots.acquire('org_b', forever());
  const b2 = await slots.acquire('org_b', forever());
  t.same(reclaimed.sort(), [2, 3], "org_b's two come from org_a's unused contexts above its share");
  t.equal(slots.activeOf('org_a'), 2, 'org_a keeps its share');
  t.equal(slots.activeOf('org_b'), 2);
  leases[0]!.reclaimable(async () => void reclaimed.push(0));
  const b3 = slots.acquire('org_b', forever());
  t.notOk(await settled(b3), 'org_b at its share waits, and nothing of org_a (at its share) is taken back');
  t.same(reclaimed.sort(), [2, 3]);
  b1();
  t.ok(await settled(b3), 'it gets the next context that frees');
  b2();
});

t.test('shares are counted across instances: contexts held elsewhere make an organization over its share here', async (t) => {
  const elsewhere = new Map([['org_a', 2]]);
  const shared: SharedHoldings & { held: Map<string, string> } = {
    held: new Map(),
    async elsewhere(orgs) {
      return new Map(orgs.filter((o) => elsewhere.has(o)).map((o) => [o, elsewhere.get(o)!]));
    },
    async hold(id, org) {
      this.held.set(id, org);
    },
    async drop(id) {
      this.held.delete(id);
    },
  };
  const slots = new ContextSlots({ maxContexts: 2, maxContextsPerOrg: 2 });
  slots.share(shared);
  const mine = [await slots.acquire('org_a'), await slots.acquire('org_a')];
  t.same([...shared.held.values()], ['org_a', 'org_a'], 'this instance records what it holds for the others');
  let taken = 0;
  mine[1]!.reclaimable(async () => {
    taken++;
    mine[1]!();
  });
  // org_a holds two here and two elsewhere: four, above its share of two. org_b, holding none, takes back the unused one.
  await slots.acquire('org_b', forever());
  t.equal(taken, 1, "an unused context of org_a's is taken back: its total is above its share");
  t.equal(shared.held.size, 2, 'the release is recorded');
  const refused = await slots.acquire('org_c').catch((err: NoSlot) => err);
  t.match(refused, { state: { held: 0, share: 2 } });
  const a = await slots.acquire('org_a').catch((err: NoSlot) => err);
  t.match(a, { state: { held: 3, heldHere: 1 } }, 'a refusal counts the organization everywhere');
});

t.test('a wait given up is refused with NoSlot and leaves the queue; a closing worker refuses every waiter', async (t) => {
  const slots = new ContextSlots({ maxContexts: 1, maxContextsPerOrg: 1 });
  const held = await slots.acquire('org_a');
  held.freesBy(new Date('2030-01-01T00:00:00Z'));
  const giveUp = new AbortController();
  const waiting = slots.acquire('org_b', { signal: giveUp.signal });
  await settled(waiting);
  t.equal(slots.waiting, 1);
  giveUp.abort();
  await t.rejects(waiting, NoSlot);
  t.same(((await waiting.catch((err: NoSlot) => err)) as NoSlot).state.freesBy, new Date('2030-01-01T00:00:00Z'), 'the refusal says when a context frees at the latest');
  t.equal(slots.waiting, 0, 'it left the queue');
  const aborted = new AbortController();
  aborted.abort();
  await t.rejects(slots.acquire('org_b', { signal: aborted.signal }), NoSlot, 'an already given-up wait is refused at once');
  const last = slots.acquire('org_c', forever());
  await settled(last);
  slots.failWaiting(new Error('closed'));
  await t.rejects(last, { message: 'closed' });
  held();
  t.equal(slots.active, 0);
});
