import t from 'tap';
import { projectionsTable } from '../../src/cli-format.ts';
import { withoutHealthPolls } from '../../src/log-filter.ts';

// What a person reads at a terminal: the request log without health polls,
// and `projections status` as a table with plain numbers.

t.test('health polls leave the terminal log; other requests and a poll that warns stay', async (t) => {
  const seen: string[] = [];
  const log = withoutHealthPolls({ write: (l) => seen.push(l) });
  const line = (o: Record<string, unknown>) => log.write(JSON.stringify(o) + '\n');
  line({ level: 30, request_id: 'r1', req: { method: 'GET', url: '/healthz' }, msg: 'incoming request' });
  line({ level: 30, request_id: 'r1', res: { statusCode: 200 }, msg: 'request completed' });
  line({ level: 30, request_id: 'r2', req: { method: 'GET', url: '/readyz?verbose=1' }, msg: 'incoming request' });
  line({ level: 40, request_id: 'r2', msg: 'read side behind' });
  line({ level: 30, request_id: 'r3', req: { method: 'GET', url: '/v1/whoami' }, msg: 'incoming request' });
  line({ level: 30, request_id: 'r3', res: { statusCode: 200 }, msg: 'request completed' });
  log.write('not json\n');
  t.same(
    seen.map((l) => (l.startsWith('{') ? (JSON.parse(l) as { request_id: string; msg: string }).request_id + ' ' + JSON.parse(l).msg : l.trim())),
    ['r2 read side behind', 'r3 incoming request', 'r3 request completed', 'not json'],
  );
});

t.test('projections status at a terminal: aligned columns, positions without their padding', async (t) => {
  const row = (name: string, position: string, status = 'running') => ({ name, kind: 'projection', version: 1, position, status, error: null, head: '00000000000000000042', caught_up: position >= '00000000000000000042' });
  const out = projectionsTable([row('mandates', '00000000000000000042'), row('x402', '00000000000000000007'), row('webhooks', '00000000000000000040', 'failed')]);
  const lines = out.trimEnd().split('\n');
  t.match(lines[0], /^NAME\s+KIND\s+VERSION\s+POSITION \/ HEAD\s+STATUS$/);
  t.match(lines[1], /^mandates\s+projection\s+1\s+42 \/ 42\s+caught up$/);
  t.match(lines[2], /^x402\s+projection\s+1\s+7 \/ 42\s+behind$/);
  t.match(lines[3], /^webhooks\s+projection\s+1\s+40 \/ 42\s+failed$/);
  t.equal(lines[1]!.indexOf('projection'), lines[0]!.indexOf('KIND'), 'columns line up');
  t.match(lines[4], /^3 projections and reactors; log head 42$/);
});
