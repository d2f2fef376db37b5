import Fastify from 'fastify';
import t from 'tap';
import { RequestLog, requestChildLogger } from '../../src/http/kernel/request-log.ts';

// A request's logger is made when it first writes (src/http/kernel/request-log.ts):
// an operator still finds every line of a request by its request_id, lines
// below the level are still not written, and what counts requests sees each
// finished response once.

async function appAt(level: string) {
  const lines: Record<string, unknown>[] = [];
  const requestLog = new RequestLog({ requestIdLogLabel: 'request_id' });
  const completed: string[] = [];
  requestLog.observe((req, reply) => completed.push(`${req.method} ${req.routeOptions.url ?? 'unmatched'} ${reply.statusCode}`));
  const app = Fastify({
    logger: { level, stream: { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) } },
    logController: requestLog,
    childLoggerFactory: requestChildLogger,
    genReqId: () => `req_${Math.random().toString(16).slice(2)}`,
  });
  app.get('/quiet', async (req) => {
    req.log.info('below warn');
    req.log.debug({ detail: 1 }, 'below warn too');
    return { ok: true };
  });
  app.get('/loud', async (req) => {
    req.log.warn({ step: 1 }, 'first');
    req.log.error({ step: 2 }, 'second');
    req.log.child({ part: 'inner' }).warn('from a child');
    return { ok: true };
  });
  await app.ready();
  t.teardown(() => app.close());
  return { app, lines, completed };
}

t.test('at warn: a quiet request writes nothing; every line a request writes carries its request_id', async (t) => {
  const { app, lines, completed } = await appAt('warn');
  await app.inject({ method: 'GET', url: '/quiet' });
  t.same(lines, [], 'no line below the level, the request lines included');
  await app.inject({ method: 'GET', url: '/loud' });
  t.same(
    lines.map((l) => [l.msg, l.level]),
    [
      ['first', 40],
      ['second', 50],
      ['from a child', 40],
    ],
  );
  const ids = new Set(lines.map((l) => l.request_id));
  t.equal(ids.size, 1, 'one request, one id on all its lines');
  t.match([...ids][0], /^req_/);
  t.equal(lines[2]!.part, 'inner', "a child's own bindings too");
  await app.inject({ method: 'GET', url: '/nowhere' });
  t.same(completed, ['GET /quiet 200', 'GET /loud 200', 'GET unmatched 404'], 'each finished response seen once');
});

t.test("at info: fastify's own request lines, with the request_id", async (t) => {
  const { app, lines } = await appAt('info');
  await app.inject({ method: 'GET', url: '/quiet' });
  t.same(
    lines.map((l) => l.msg),
    ['incoming request', 'below warn', 'request completed'],
  );
  t.equal(new Set(lines.map((l) => l.request_id)).size, 1);
  t.match(lines[0]!.request_id, /^req_/);
});
