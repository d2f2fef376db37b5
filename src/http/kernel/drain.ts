import type { Socket } from 'node:net';
import { PassThrough, Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { sendResponse } from './errors.ts';

// Draining an instance (SIGTERM, Instance.close: docs/deployment.md "Rolling
// restart"). fastify's close stops accepting connections, closes the idle
// ones and waits for the requests in flight; what it cannot know is that an
// event stream a client subscribed to never ends by itself. Every such stream
// is sent through here, and the drain ends each with a `retry:` hint: the
// client's EventSource reconnects (with its Last-Event-ID), through the
// balancer, to another instance. Any other streamed answer (the session send
// loop's events, an export) is the progress of work this instance is doing:
// a request in flight, waited for like any other.
//
// Behind a balancer (SHUTDOWN_DELAY_MS, docs/deployment.md "Rolling restart"):
// readiness (`/readyz`, and `/healthz` for balancers that read that) answers
// 503 first, while the listener stays open and every request is served as
// before for the delay; a balancer that polls readiness takes the instance out
// in that time, so no request meets a refused connection. Then the drain
// proper begins. A delay of 0 (the default) begins it at once.
//
// An answer whose headers went out before the drain said keep-alive; Node
// would hold its connection open (and the close with it) for the keep-alive
// timeout once it ends. The drain closes each such connection when its answer
// is out; an answer sent after the drain began says `Connection: close`. A
// connection on which nothing was sent yet (a browser's preconnect) is closed
// when the drain begins.

/** What ends a drained stream: no event, a reconnection delay for EventSource (ms). */
export const RETRY_HINT = 'retry: 1000\n\n';

/** Closes the answer's connection once the answer is out. */
function closeAfter(reply: FastifyReply): void {
  const socket = reply.raw.socket;
  reply.raw.once('finish', () => socket?.end());
}

/** How the pre-stop delay waits: a timer by default; tests end it on a condition. */
export type DrainPause = (ms: number) => Promise<void>;
const timerPause: DrainPause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export class Drain {
  /** Set when the instance is told to stop: readiness answers 503 from then on (before the drain proper, by SHUTDOWN_DELAY_MS). */
  stopping = false;
  /** Set when the drain begins: event streams end, every answer closes its connection. */
  started = false;
  /** What the drain does to each streamed answer still open. */
  private readonly open = new Set<() => void>();

  /** A route's answer. A GET's event stream (a subscription its client resumes elsewhere) is ended by the drain; any other stream is waited for. */
  answer<R extends { body?: unknown; headers?: Record<string, string> }>(method: string, reply: FastifyReply, r: R): R {
    if (!(r.body instanceof Readable)) return r;
    if (method === 'GET' && r.headers?.['content-type']?.startsWith('text/event-stream')) return { ...r, body: this.stream(reply, r.body) };
    const drained = () => {
      this.open.delete(drained);
      closeAfter(reply);
    };
    this.open.add(drained);
    reply.raw.once('close', () => this.open.delete(drained));
    return r;
  }

  /**
   * The body to send for a GET's event stream: the route's own stream, seen
   * through one the drain can end with the hint at any moment (before fastify
   * has piped it or while it streams) without a write after its end.
   */
  private stream(reply: FastifyReply, body: Readable): Readable {
    const wire = new PassThrough();
    const end = () => {
      this.open.delete(end);
      body.unpipe(wire);
      body.destroy();
      closeAfter(reply);
      wire.end(RETRY_HINT);
    };
    body.once('error', (err) => wire.destroy(err));
    // The client went away (fastify destroys what it sends): the route's stream goes too.
    wire.once('close', () => {
      this.open.delete(end);
      body.destroy();
    });
    body.pipe(wire);
    if (this.started) end();
    else this.open.add(end);
    return wire;
  }

  /** Marks the instance draining: every open event stream ends, every other streamed answer closes its connection when it is out. */
  begin(): void {
    this.stopping = true;
    this.started = true;
    for (const end of [...this.open]) end();
  }
}

/** The probes a balancer reads: they answer 503 `draining` from the moment the instance is told to stop. */
const PROBES: Record<string, Record<string, unknown>> = {
  '/readyz': { status: 'not_ready', reason: 'draining', followers: [] },
  '/healthz': { status: 'draining' },
};

/**
 * The drain's hooks, on the root before the routes: in preClose (before
 * fastify stops listening) readiness fails, then after `delayMs` (the listener
 * still open, every request served) the drain begins; an answer sent while
 * draining closes its connection (an idle keep-alive connection would
 * otherwise hold the close until it times out); readiness answers 503
 * `draining`, so a balancer that checks it takes the instance out.
 */
export function registerDrain(app: FastifyInstance, drain: Drain, opts: { delayMs?: number; pause?: DrainPause } = {}): void {
  const delayMs = opts.delayMs ?? 0;
  // Connections a client opened ahead of need (a browser's preconnect) and sent nothing on: Node's
  // closeIdleConnections leaves them, and each held the server's close until its headers timeout (60 s).
  const connections = new Set<Socket>();
  app.server.on('connection', (socket: Socket) => {
    connections.add(socket);
    socket.once('close', () => connections.delete(socket));
  });
  app.addHook('preClose', async () => {
    drain.stopping = true;
    if (delayMs > 0) await (opts.pause ?? timerPause)(delayMs);
    drain.begin();
    // fastify stops listening right after these hooks: none can open after this.
    for (const socket of connections) if (socket.bytesRead === 0) socket.destroy();
  });
  app.addHook('onSend', (_req, reply, payload, done) => {
    if (drain.started) reply.header('connection', 'close');
    done(null, payload);
  });
  app.addHook('onRequest', (req, reply, done) => {
    const probe = drain.stopping ? PROBES[req.routeOptions.url ?? ''] : undefined;
    if (probe) {
      void sendResponse(reply, { status: 503, body: probe, headers: { 'cache-control': 'no-store' } });
      return;
    }
    done();
  });
}
