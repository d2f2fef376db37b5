import http from 'node:http';
import type { AddressInfo } from 'node:net';

// A round-robin HTTP load balancer on loopback, as in front of a deployment:
// each request goes to the next instance; a request whose instance refuses the
// connection (stopped, restarting) is sent to the next one, as balancers do
// for connection failures (nothing of it reached the instance). Bodies are
// buffered (so a request can be resent); answers stream (SSE). The client's
// address travels in X-Forwarded-For. A backend's address can be replaced (an
// instance restarted on another port, as an orchestrator updates its endpoints).

export type Balancer = {
  url: string;
  backends: string[];
  /** Answers received from each backend slot. */
  sent: number[];
  /** Attempts sent again to the next backend because the connection failed before any answer. */
  resent: number;
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

export async function startBalancer(backends: string[]): Promise<Balancer> {
  let next = 0;
  const sent = backends.map(() => 0);
  const stats = { resent: 0 };
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const start = next++ % backends.length;
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
          if (!res.headersSent && RESEND.has(err.code ?? '') && k + 1 < backends.length * 2) {
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
    get resent() {
      return stats.resent;
    },
    replace(i, url) {
      backends[i] = url;
    },
    close: () =>
      new Promise<void>((r) => {
        agent.destroy();
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
