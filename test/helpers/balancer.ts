import http from 'node:http';
import type { AddressInfo } from 'node:net';

// A round-robin HTTP load balancer on loopback, as in front of a deployment:
// each request goes to the next instance; a request whose instance refuses the
// connection (stopped, restarting) is sent to the next one, as balancers do
// for connection failures (nothing of it reached the instance). Bodies are
// buffered (so a request can be resent); answers stream (SSE). The client's
// address travels in X-Forwarded-For. A backend's address can be replaced (an
// instance restarted on another port, as an orchestrator updates its endpoints).
// Options make it the other common kind: one that polls each backend's
// readiness on a fresh connection and sends only to ready ones (all of them
// when none is), and that does not resend a failed connection (answers 502).

export type Balancer = {
  url: string;
  backends: string[];
  /** Answers received from each backend slot. */
  sent: number[];
  /** Attempts sent again to the next backend because the connection failed before any answer. */
  resent: number;
  /** Whether each backend's last readiness poll answered 200 (all true without `readiness`). */
  ready: boolean[];
  /** Readiness polls answered by each backend slot. */
  polls: number[];
  /** Puts another instance's address in a backend's slot. */
  replace(i: number, url: string): void;
  close(): Promise<void>;
};

/**
 * Hop-by-hop headers (RFC 9110 §7.6.1) and those a Connection header names
 * concern one connection and are not forwarded, as a proxy must not: a
 * draining instance's `Connection: close` closes the balancer's connection to
 * it, never the client's connection to the balancer.
 */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade']);
function endToEnd(headers: http.IncomingHttpHeaders): http.IncomingHttpHeaders {
  const named = new Set(
    String(headers.connection ?? '')
      .split(',')
      .map((h) => h.trim().toLowerCase())
      .filter(Boolean),
  );
  return Object.fromEntries(Object.entries(headers).filter(([h]) => !HOP_BY_HOP.has(h) && !named.has(h)));
}

/** Connection failures on which nothing was answered: the request goes to the next instance. */
const RESEND = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE']);

export type BalancerOptions = {
  /** Resend a request whose connection failed before any answer to the next instance (default true). */
  resend?: boolean;
  /** Poll `path` on each backend every `everyMs` (the balancer's own schedule, as a real one has) and send only to those answering 200. */
  readiness?: { path: string; everyMs: number };
};

/** One readiness poll over a fresh connection: 200 or not. */
function poll(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get(url, { agent: false, headers: { connection: 'close' } }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.setTimeout(5_000, () => req.destroy());
    req.on('error', () => resolve(false));
  });
}

export async function startBalancer(backends: string[], opts: BalancerOptions = {}): Promise<Balancer> {
  let next = 0;
  const sent = backends.map(() => 0);
  const ready = backends.map(() => true);
  const polls = backends.map(() => 0);
  const stats = { resent: 0 };
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  let polling: NodeJS.Timeout | undefined;
  let closed = false;
  if (opts.readiness) {
    const { path, everyMs } = opts.readiness;
    const round = async () => {
      await Promise.all(
        backends.map(async (b, i) => {
          ready[i] = await poll(new URL(path, b).toString());
          polls[i]!++;
        }),
      );
      if (!closed) polling = setTimeout(() => void round(), everyMs);
    };
    await round();
  }
  /** The slot of the next request: round robin over the ready backends (over all when none is). */
  const pick = (): number => {
    const n = backends.length;
    for (let k = 0; k < n; k++) {
      const i = next++ % n;
      if (ready[i]) return i;
    }
    return next++ % n;
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const start = pick();
      const attempt = (k: number) => {
        const i = (start + k) % backends.length;
        const target = new URL(req.url ?? '/', backends[i]);
        const headers = { ...endToEnd(req.headers), 'x-forwarded-for': req.socket.remoteAddress ?? '', 'x-forwarded-proto': 'http' };
        const out = http.request(target, { method: req.method, headers, agent }, (answer) => {
          sent[i]!++;
          res.writeHead(answer.statusCode ?? 502, endToEnd(answer.headers));
          answer.pipe(res);
          res.on('close', () => answer.destroy());
        });
        out.on('error', (err: NodeJS.ErrnoException) => {
          if (!res.headersSent && opts.resend !== false && RESEND.has(err.code ?? '') && k + 1 < backends.length * 2) {
            stats.resent++;
            return attempt(k + 1);
          }
          if (!res.headersSent) res.writeHead(502).end();
          else res.destroy();
        });
        out.end(body);
      };
      attempt(0);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    backends,
    sent,
    ready,
    polls,
    get resent() {
      return stats.resent;
    },
    replace(i, url) {
      backends[i] = url;
    },
    close: () =>
      new Promise<void>((r) => {
        closed = true;
        clearTimeout(polling);
        agent.destroy();
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
