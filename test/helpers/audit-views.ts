import { createPublicKey, verify } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';
import type { Evidence } from '../../src/audit/monitor.ts';

// What the monitor tests share: a loopback proxy through which the log shows
// a monitor another view (a rewritten latest checkpoint, made-up level-0
// tiles), and the monitor's evidence checked by node:crypto alone, with none
// of our code: both notes signed by the log key, and the claim they prove.

export type View = {
  /** Rewrites the latest-checkpoint answer. */
  checkpoint?: (body: Record<string, unknown>) => Record<string, unknown>;
  /** Answers the level-0 tile `n` at `width` instead of the service. */
  tile?: (n: number, width: number) => Buffer;
};

/** A proxy to `target` showing `view` (read at each request: a test may change it between passes). */
export async function viewProxy(t: Test, target: string, view: View): Promise<string> {
  const server = http.createServer(async (req, res) => {
    const tile = /^\/v1\/audit-events\/tile\/0\/(\d+)(?:\?width=(\d+))?$/.exec(req.url ?? '');
    if (tile && view.tile) {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      return void res.end(view.tile(Number(tile[1]), Number(tile[2] ?? 256)));
    }
    const r = await fetch(`${target}${req.url}`, { headers: { authorization: String(req.headers.authorization ?? '') } });
    let body = Buffer.from(await r.arrayBuffer());
    if (req.url === '/v1/audit-events/checkpoint' && view.checkpoint && r.status === 200) body = Buffer.from(JSON.stringify(view.checkpoint(JSON.parse(body.toString()))));
    res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/octet-stream' });
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Evidence checked with node:crypto only: both notes signed by the log key, one origin, and the claim (a fork: one size, two roots; a rollback: a smaller size served). */
export function independentlyProven(ev: Evidence): boolean {
  const [name, id] = ev.log_key.split('+') as [string, string];
  const raw = Buffer.from(ev.log_key.split('+').slice(2).join('+'), 'base64').subarray(1);
  const key = createPublicKey({ key: Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), raw]), format: 'der', type: 'spki' });
  const open = (note: string) => {
    const body = note.slice(0, note.indexOf('\n\n') + 1);
    const [origin, size, root] = body.split('\n');
    const signed = note
      .slice(note.indexOf('\n\n') + 2)
      .split('\n')
      .some((l) => {
        const m = /^\u2014 (\S+) (\S+)$/.exec(l);
        if (!m || m[1] !== name) return false;
        const s = Buffer.from(m[2]!, 'base64');
        return s.subarray(0, 4).toString('hex') === id && verify(null, Buffer.from(body), key, s.subarray(4));
      });
    return { origin, size: Number(size), root, signed };
  };
  const a = open(ev.trusted_checkpoint!);
  const b = open(ev.served_checkpoint!);
  if (!a.signed || !b.signed || a.origin !== b.origin) return false;
  if (ev.kind === 'fork') return a.size === b.size && a.root !== b.root;
  if (ev.kind === 'rollback') return b.size < a.size;
  return false;
}
