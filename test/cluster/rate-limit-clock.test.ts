import t from 'tap';
import { SharedRateLimiter } from '../../src/http/kernel/ratelimit.ts';
import { openDb } from '../../src/postgres/db.ts';
import { testDatabase } from '../helpers/db.ts';
import { until } from '../helpers/wait.ts';

// Two instances' limiters on one key (src/http/kernel/ratelimit.ts): one asks
// while its pool has no free connection, the other spends from the bucket in
// the meantime. The one that waited decides at the time its statement runs:
// a clock read before the wait was stale by more than the burst window, and
// refused a request the bucket had room for (seen as 429s with a burst of
// 100 000 in cluster/rolling-restart).

t.test('a limiter that waited for a connection decides at the time its statement runs', async (t) => {
  const { url, db } = await testDatabase(t, { schema: true });
  const busy = openDb(url, { max: 1 });
  t.teardown(() => busy.close());
  // Two requests a burst, one more each millisecond: a 2 ms window.
  const cfg = { burst: 2, perSecond: 1000 };
  const a = new SharedRateLimiter(busy, cfg);
  const b = new SharedRateLimiter(db, cfg);
  await a.take('key');
  let release!: () => void;
  const holding = busy.transaction(() => new Promise<void>((r) => (release = r)));
  const asked = Date.now();
  const waiting = a.take('key');
  // Past the window before the other instance spends, then the connection is free again.
  await until(() => Date.now() >= asked + 10, 'ten milliseconds');
  await b.take('key');
  release();
  await holding;
  await t.resolves(waiting, 'admitted: when its statement ran, the bucket had a request left');
});
