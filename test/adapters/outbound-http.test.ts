import http from 'node:http';
import t from 'tap';
import { addressKind, checkUrl, guardedRequest } from '../../src/adapters/outbound-http.ts';

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

t.test('address classification: every spelling of a non-public address is refused, public ones pass', async (t) => {
  const none = { loopback: false, private: false };
  const refused: [string, string][] = [
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::127.0.0.1', 'loopback'], // IPv4-compatible (deprecated)
    ['64:ff9b::a00:1', 'private'], // NAT64 of 10.0.0.1
    ['64:ff9b::7f00:1', 'loopback'], // NAT64 of 127.0.0.1
    ['64:ff9b::169.254.169.254', 'link_local'], // NAT64 of the metadata service
    ['2002:a9fe:a9fe::1', 'link_local'], // 6to4 of 169.254.169.254
    ['2002:c0a8:101::', 'private'], // 6to4 of 192.168.1.1
    ['64:ff9b:1::1', 'private'], // local-use NAT64
    ['100.64.0.1', 'private'],
    ['198.18.0.1', 'reserved'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'reserved'],
    ['0.0.0.0', 'reserved'],
    ['192.0.0.8', 'reserved'],
    ['192.0.2.1', 'reserved'],
    ['203.0.113.9', 'reserved'],
    ['224.0.0.1', 'reserved'],
    ['fc00::1', 'private'],
    ['fd12:3456::1', 'private'],
    ['fe80::1', 'link_local'],
    ['ff02::1', 'reserved'],
    ['2001:db8::1', 'reserved'],
    ['2001::1', 'reserved'], // Teredo
    ['100::1', 'reserved'],
    ['::', 'reserved'],
    ['::1', 'loopback'],
    ['4000::1', 'reserved'], // outside global unicast 2000::/3
  ];
  for (const [ip, kind] of refused) {
    t.equal(addressKind(ip), kind, ip);
    const literal = ip.includes(':') ? `[${ip}]` : ip;
    t.throws(() => checkUrl(`http://${literal}/`, none), { message: /^refused target/ }, `${ip} refused as a URL`);
    await t.rejects(guardedRequest('http://innocent.example/', none, { resolve: async () => [{ address: ip, family: ip.includes(':') ? 6 : 4 }] }), { message: /^refused target/ }, `${ip} refused when a name resolves to it`);
  }
  for (const ip of ['8.8.8.8', '1.1.1.1', '100.128.0.1', '198.20.0.1', '2606:4700:4700::1111', '2a00:1450:4001::1', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1']) {
    t.equal(addressKind(ip), 'public', ip);
    const literal = ip.includes(':') ? `[${ip}]` : ip;
    t.doesNotThrow(() => checkUrl(`http://${literal}/`, none), `${ip} passes`);
  }
  t.doesNotThrow(() => checkUrl('http://[::ffff:127.0.0.1]/', { loopback: true, private: false }), 'mapped loopback allowed where loopback is');
  t.throws(() => checkUrl('http://[64:ff9b::a00:1]/', { loopback: true, private: false }), { message: /private/ }, 'NAT64 of a private address is private');
});
