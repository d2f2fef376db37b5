import type { FastifyInstance, FastifyReply } from 'fastify';

// The pages' live streams (text/event-stream answers a page's EventSource
// reads). A stream never ends by itself, so the server's close (SIGTERM, a
// rolling restart) ends each: with a `retry:` hint, on which the page
// reconnects after a second, through the balancer, to an instance that is up,
// and with its connection, which is never reused (left open for keep-alive it
// held the close for fastify's keep-alive timeout, 72 s). A stream asked for
// once the close began (a page reconnecting over a connection still open)
// ends the same way at once. src/http/kernel/drain.ts does the same for the
// API's streams.

const RETRY_HINT = 'retry: 1000\n\n';
const HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no', 'x-content-type-options': 'nosniff' };

export type LiveStream = { write(text: string): void; end(): void };

export class LiveStreams {
  private closing = false;
  private readonly open = new Set<() => void>();

  constructor(app: FastifyInstance) {
    app.addHook('preClose', async () => {
      this.closing = true;
      for (const end of [...this.open]) end();
    });
  }

  /**
   * Answers `reply` with a stream (fastify lets go of it): `write` sends, `end`
   * ends it. `feed` starts what writes to it and returns what stops that; it
   * runs once the stream is open, and what it returns runs once when the
   * stream ends (the browser left, the server closes, or `end`).
   */
  start(reply: FastifyReply, feed: (stream: LiveStream) => () => void): void {
    reply.hijack();
    reply.raw.writeHead(200, HEADERS);
    let ended = false;
    const socket = reply.raw.socket;
    let stop: () => void = () => {};
    const end = () => {
      if (ended) return;
      ended = true;
      this.open.delete(end);
      stop();
      reply.raw.once('finish', () => socket?.end());
      reply.raw.end(RETRY_HINT);
    };
    if (this.closing) return end();
    reply.raw.write(': open\n\n');
    this.open.add(end);
    reply.raw.on('close', end);
    const stopFeed = feed({ write: (text) => void (!ended && reply.raw.write(text)), end });
    if (ended) stopFeed();
    else stop = stopFeed;
  }
}
