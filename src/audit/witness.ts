import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { cosign, cosignerVerifierKey, parseAddCheckpoint, splitNote } from './cosignature.ts';
import { EMPTY_ROOT, verifyConsistency } from './merkle.ts';
import { openCheckpoint, type SigningKey } from './note.ts';

// The witness role of C2SP tlog-witness: per log (its origin line) the last
// checkpoint it cosigned, kept in its own state file. add-checkpoint accepts a
// checkpoint signed by a trusted log key only with "old <size>" equal to that
// checkpoint's size and a consistency proof from it, and answers an Ed25519
// cosignature (C2SP tlog-cosignature) with the time of signing. The check and
// the write of the new state are one step (a queue), and the state reaches the
// disk before the answer, so two requests cannot roll a log back.

export type TrustedLog = { originPrefix: string; key: { name: string; publicKey: Uint8Array } };
export type WitnessOptions = {
  key: SigningKey;
  logs: readonly TrustedLog[];
  stateFile: string;
  now?: () => Date;
  /** One line per checkpoint cosigned or refused (the operator's log of what this witness vouched for). */
  log?: (line: string) => void;
};
type LogState = { size: number; root: string; checkpoint: string };
type Answer = { status: number; body: string; contentType?: string };

const STATE_FORMAT = 'agent-ledger-witness-state/v1';
const MAX_BODY = 64 * 1024;

export class Witness {
  private logs = new Map<string, LogState>();
  private queue: Promise<unknown> = Promise.resolve();
  private server: http.Server | undefined;
  private readonly now: () => Date;
  /** Refused add-checkpoint requests that carried a valid log signature: possible evidence of log misbehaviour. */
  readonly refusals: { origin: string; status: number; reason: string; request: string }[] = [];

  constructor(private readonly opts: WitnessOptions) {
    this.now = opts.now ?? (() => new Date());
  }

  get verifierKey(): string {
    return cosignerVerifierKey(this.opts.key.name, this.opts.key.publicKey);
  }

  async load(): Promise<void> {
    try {
      const s = JSON.parse(await fs.readFile(this.opts.stateFile, 'utf8')) as { format: string; logs: Record<string, LogState> };
      if (s.format !== STATE_FORMAT) throw new Error(`${this.opts.stateFile}: not a witness state file`);
      this.logs = new Map(Object.entries(s.logs));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }

  private async persist(): Promise<void> {
    const tmp = `${this.opts.stateFile}.${process.pid}.tmp`;
    await fs.mkdir(path.dirname(path.resolve(this.opts.stateFile)), { recursive: true });
    await fs.writeFile(tmp, JSON.stringify({ format: STATE_FORMAT, logs: Object.fromEntries(this.logs) }, null, 2) + '\n', { mode: 0o600 });
    await fs.rename(tmp, this.opts.stateFile);
  }

  /** The latest cosigned checkpoint of a log (with the log's and this witness's signatures), by its origin. */
  checkpointOf(origin: string): string | undefined {
    return this.logs.get(origin)?.checkpoint;
  }

  /** POST add-checkpoint, one at a time. */
  addCheckpoint(text: string): Promise<Answer> {
    const run = this.queue.then(() => this.add(text));
    this.queue = run.catch(() => {});
    return run;
  }

  private async add(text: string): Promise<Answer> {
    let req;
    try {
      req = parseAddCheckpoint(text);
    } catch (err) {
      return { status: 400, body: `${(err as Error).message}\n` };
    }
    const origin = req.note.slice(0, req.note.indexOf('\n'));
    const log = this.opts.logs.find((l) => origin.startsWith(l.originPrefix));
    if (!log) return { status: 404, body: 'unknown log origin\n' };
    let opened;
    try {
      opened = openCheckpoint(req.note, log.key);
      splitNote(req.note);
    } catch (err) {
      return { status: 400, body: `${(err as Error).message}\n` };
    }
    if (!opened.signatureValid) return { status: 403, body: 'no valid signature from a trusted key for this origin\n' };
    const cp = opened.checkpoint;
    const refuse = (status: number, reason: string): Answer => {
      this.refusals.push({ origin, status, reason, request: text });
      this.opts.log?.(`refused ${origin} size ${cp.size}: ${reason}`);
      return { status, body: `${reason}\n` };
    };
    if (req.oldSize > cp.size) return { status: 400, body: 'old size is larger than the checkpoint size\n' };
    if (cp.size === 0 && !cp.root.equals(EMPTY_ROOT)) return refuse(422, 'a checkpoint of size 0 must have the empty root');
    const known = this.logs.get(origin);
    const storedSize = known?.size ?? 0;
    if (req.oldSize !== storedSize) return { status: 409, body: `${storedSize}\n`, contentType: 'text/x.tlog.size' };
    if (req.oldSize === 0) {
      if (req.proof.length > 0) return refuse(422, 'a proof from size 0 must be empty');
    } else if (req.oldSize === cp.size) {
      if (!cp.root.equals(Buffer.from(known!.root, 'base64'))) return refuse(422, 'same size as the cosigned checkpoint with another root');
    } else if (!verifyConsistency(req.oldSize, cp.size, Buffer.from(known!.root, 'base64'), cp.root, req.proof)) {
      return refuse(422, 'the consistency proof does not verify');
    }
    const line = cosign(splitNote(req.note).body, this.opts.key, Math.max(1, Math.floor(this.now().getTime() / 1000)));
    const previous = known;
    this.logs.set(origin, { size: cp.size, root: cp.root.toString('base64'), checkpoint: `${req.note.endsWith('\n') ? req.note : req.note + '\n'}${line}` });
    try {
      await this.persist();
    } catch (err) {
      if (previous) this.logs.set(origin, previous);
      else this.logs.delete(origin);
      throw err;
    }
    this.opts.log?.(`cosigned ${origin} size ${cp.size} root ${cp.root.toString('base64')}`);
    return { status: 200, body: line };
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://witness');
    const send = (a: Answer) => {
      res.writeHead(a.status, { 'content-type': a.contentType ?? 'text/plain; charset=utf-8' });
      res.end(a.body);
    };
    if (url.pathname === '/add-checkpoint') {
      if (req.method !== 'POST') return send({ status: 405, body: 'POST only\n' });
      const chunks: Buffer[] = [];
      let n = 0;
      for await (const c of req) {
        n += (c as Buffer).length;
        if (n > MAX_BODY) return send({ status: 413, body: 'request too large\n' });
        chunks.push(c as Buffer);
      }
      return send(await this.addCheckpoint(Buffer.concat(chunks).toString('utf8')));
    }
    const m = /^\/([0-9a-f]{64})\/checkpoint$/.exec(url.pathname);
    if (m && req.method === 'GET') {
      for (const [origin, s] of this.logs) {
        if (createHash('sha256').update(origin).digest('hex') === m[1]) return send({ status: 200, body: s.checkpoint });
      }
    }
    send({ status: 404, body: 'not found\n' });
  }

  /** Serves add-checkpoint and the monitoring checkpoint on its own port; answers the base URL. */
  async listen(port = 0, host = '127.0.0.1'): Promise<string> {
    await this.load();
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch(() => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('the witness could not record the checkpoint\n');
      });
    });
    this.server.keepAliveTimeout = 5_000;
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(port, host, () => resolve());
    });
    const a = this.server.address() as AddressInfo;
    return `http://${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}`;
  }

  async close(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
    await this.queue;
  }
}
