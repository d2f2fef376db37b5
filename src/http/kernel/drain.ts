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
// An answer whose headers went out before the drain said keep-alive; Node
// would hold its connection open (and the close with it) for the keep-alive
// timeout once it ends. The drain closes each such connection when its answer
// is out; an answer sent after the drain began says `Connection: close`.

/** What ends a drained stream: no event, a reconnection delay for EventSource (ms). */
export const RETRY_HINT = 'retry: 1000\n\n';

/** Closes the answer's connection once the answer is out. */
function closeAfter(reply: FastifyReply): void {
  const socket = reply.raw.socket;
  reply.raw.once('finish', () => socket?.end());
}

export class Drain {
  /** Set when the drain begins: readiness answers 503 from then on. */
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
    this.started = true;
    for (const end of [...this.open]) end();
  }
}

/**
 * The drain's hooks, on the root before the routes: it begins in preClose
 * (before fastify stops listening); an answer sent while draining closes its
 * connection (an idle keep-alive connection would otherwise hold the close
 * until it times out); readiness answers 503 `draining`, so a balancer that
 * checks it over a kept-alive connection takes the instance out.
 */
export function registerDrain(app: FastifyInstance, drain: Drain): void {
  app.addHook('preClose', (done) => {
    drain.begin();
    done();
  });
  app.addHook('onSend', (_req, reply, payload, done) => {
    if (drain.started) reply.header('connection', 'close');
    done(null, payload);
  });
  app.addHook('onRequest', (req, reply, done) => {
    if (drain.started && req.routeOptions.url === '/readyz') {
      void sendResponse(reply, { status: 503, body: { status: 'not_ready', reason: 'draining', followers: [] } });
      return;
    }
    done();
  });
}
