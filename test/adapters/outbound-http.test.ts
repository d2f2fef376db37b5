import http from 'node:http';
import t from 'tap';
import { guardedRequest } from '../../src/adapters/outbound-http.ts';

// The guarded outbound client over a kept-alive connection (Node's global
// agent keeps sockets alive): each request's connect guard belongs to that
// request only. A reused socket is connected already, so no connect timer may
// be armed on it (it would cut a slow answer short as "connect timeout"), and
// no listener may be left on it per request.

const server = http.createServer((req, res) => {
  const hold = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('hold') ?? '0');
  setTimeout(() => res.end(`ok ${req.socket.remotePort}`), hold);
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
t.teardown(() => new Promise((r) => server.close(r)));
const allow = { loopback: true, private: false };

t.test('many requests over one kept-alive socket: no listener piles up on it', async (t) => {
  const warnings: string[] = [];
  const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
  process.on('warning', onWarning);
  t.teardown(() => process.off('warning', onWarning));
  const ports = new Set<string>();
  for (let i = 0; i < 30; i++) {
    const r = await guardedRequest(`${base}/`, allow, { method: 'GET' });
    t.equal(r.status, 200);
    ports.add(r.body);
  }
  t.equal(ports.size, 1, 'one socket served them all');
  await new Promise((r) => setImmediate(r));
  t.same(warnings.filter((w) => w.includes('MaxListenersExceeded')), [], 'no listener leak warning');
});

t.test('a slow answer on a reused socket is not cut as a connect timeout', async (t) => {
  await guardedRequest(`${base}/`, allow, { method: 'GET' }); // the socket is open and idle in the agent
  const r = await guardedRequest(`${base}/?hold=400`, allow, { method: 'GET', connectTimeoutMs: 50, timeoutMs: 30_000 });
  t.equal(r.status, 200, 'answered after longer than the connect timeout, on a connected socket');
});
