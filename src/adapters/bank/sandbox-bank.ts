import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { listenStable, type SandboxHome, StateFile } from '../sandbox-home.ts';

// The sandbox bank: a small HTTP server on loopback speaking the protocol
// HttpBank expects (an Open Finance Brasil-shaped consent flow). Each consent
// has a deterministic statement (5 pages of 25 transactions by default).
// `faults` lets tests inject refusals, a failing page and slowness.

export type SandboxFaults = { refuseCreate?: boolean; refuseCode?: boolean; failPage?: number | null; slowMs?: number };

type Consent = { id: string; status: 'AWAITING_AUTHORISATION' | 'AUTHORISED' | 'REJECTED' | 'DELETED'; redirectUri: string; pages: number };
/** What the sandbox bank keeps under DATA_DIR across restarts. */
type Saved = { consents: Consent[]; codes: [string, string][]; tokens: [string, string][] };

export class SandboxBank {
  readonly faults: SandboxFaults = {};
  readonly consents = new Map<string, Consent>();
  private readonly codes = new Map<string, string>();
  private readonly tokens = new Map<string, string>();
  private server: http.Server | undefined;
  url = '';
  readonly clientId = 'sandbox-client';
  readonly clientSecret = 'sandbox-secret';

  private readonly state: StateFile<Saved> | undefined;

  /** With a home, consents and their tokens survive a restart, on the same port. */
  constructor(
    private readonly pages = 5,
    private readonly home?: SandboxHome,
  ) {
    this.state = home ? new StateFile<Saved>(home, 'bank') : undefined;
    const saved = this.state?.load();
    for (const c of saved?.consents ?? []) this.consents.set(c.id, c);
    for (const [k, v] of saved?.codes ?? []) this.codes.set(k, v);
    for (const [k, v] of saved?.tokens ?? []) this.tokens.set(k, v);
  }

  private persist(): void {
    this.state?.save({ consents: [...this.consents.values()], codes: [...this.codes], tokens: [...this.tokens] });
  }

  async start(port?: number): Promise<string> {
    // The consent page (a GET) issues a code: every request may change something.
    this.server = http.createServer((req, res) => void this.handle(req, res).finally(() => this.persist()));
    const bound = port !== undefined ? await new Promise<number>((r) => this.server!.listen(port, '127.0.0.1', () => r((this.server!.address() as AddressInfo).port))) : await listenStable(this.server, this.home, 'bank', 'the sandbox bank');
    this.url = `http://127.0.0.1:${bound}`;
    return this.url;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }

  private send(res: http.ServerResponse, status: number, body?: unknown, headers: Record<string, string> = {}) {
    res.writeHead(status, { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers });
    res.end(body !== undefined ? JSON.stringify(body) : undefined);
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    let raw = '';
    for await (const c of req) raw += c;
    if (this.faults.slowMs) await new Promise((r) => setTimeout(r, this.faults.slowMs));
    const url = new URL(req.url ?? '/', this.url);
    const auth = req.headers.authorization ?? '';
    const basicOk = auth === `Basic ${Buffer.from(`${this.clientId}:${this.clientSecret}`).toString('base64')}`;
    const body = raw ? (JSON.parse(raw) as Record<string, unknown>) : {};

    if (req.method === 'POST' && url.pathname === '/consents') {
      if (!basicOk) return this.send(res, 401, { errors: [{ code: 'UNAUTHORIZED' }] });
      if (this.faults.refuseCreate) return this.send(res, 422, { errors: [{ code: 'PERMISSOES_INVALIDAS' }] });
      const id = `urn:sandboxbank:${randomBytes(8).toString('hex')}`;
      const data = body.data as { redirectUri?: string } | undefined;
      this.consents.set(id, { id, status: 'AWAITING_AUTHORISATION', redirectUri: data?.redirectUri ?? '', pages: this.pages });
      return this.send(res, 201, { data: { consentId: id, status: 'AWAITING_AUTHORISATION', expirationDateTime: new Date(Date.now() + 90 * 86_400_000).toISOString() } });
    }
    if (req.method === 'GET' && url.pathname === '/authorise') {
      // The person's consent page: in the sandbox it approves at once and redirects back.
      const c = this.consents.get(url.searchParams.get('consent_id') ?? '');
      const redirect = url.searchParams.get('redirect_uri') ?? '';
      if (!c || !redirect) return this.send(res, 400, { errors: [{ code: 'INVALID_REQUEST' }] });
      const code = randomBytes(12).toString('hex');
      this.codes.set(code, c.id);
      const back = new URL(redirect);
      back.searchParams.set('code', code);
      back.searchParams.set('state', url.searchParams.get('state') ?? '');
      return this.send(res, 302, undefined, { location: back.toString() });
    }
    if (req.method === 'POST' && url.pathname === '/token') {
      if (!basicOk) return this.send(res, 401, { error: 'invalid_client' });
      const consentId = this.codes.get(String(body.code ?? ''));
      if (this.faults.refuseCode || !consentId) return this.send(res, 400, { error: 'invalid_grant' });
      this.codes.delete(String(body.code));
      const token = randomBytes(16).toString('hex');
      this.tokens.set(token, consentId);
      this.consents.get(consentId)!.status = 'AUTHORISED';
      return this.send(res, 200, { access_token: token, refresh_token: randomBytes(16).toString('hex'), expires_in: 3600, token_type: 'Bearer' });
    }
    const tx = /^\/consents\/([^/]+)\/transactions$/.exec(url.pathname);
    if (req.method === 'GET' && tx) {
      const id = decodeURIComponent(tx[1]!);
      const c = this.consents.get(id);
      if (!c || this.tokens.get(auth.replace(/^Bearer /, '')) !== id || c.status !== 'AUTHORISED') return this.send(res, 401, { errors: [{ code: 'UNAUTHORIZED' }] });
      const page = Number(url.searchParams.get('page') ?? '1');
      if (this.faults.failPage === page) return this.send(res, 503, { errors: [{ code: 'SERVICE_UNAVAILABLE' }] });
      const size = 25;
      const data = Array.from({ length: size }, (_, i) => {
        const n = (page - 1) * size + i + 1;
        return { transactionId: `${id}:tx-${n}`, amountMinor: String(1000 + n), currency: 'BRL', description: `PIX ${n}`, bookedAt: new Date(Date.UTC(2026, 10, 1) + n * 3_600_000).toISOString(), creditDebit: n % 3 === 0 ? 'DEBIT' : 'CREDIT' };
      });
      return this.send(res, 200, { data: page <= c.pages ? data : [], meta: { totalPages: c.pages, totalRecords: c.pages * size } });
    }
    const del = /^\/consents\/([^/]+)$/.exec(url.pathname);
    if (req.method === 'DELETE' && del) {
      if (!basicOk) return this.send(res, 401, {});
      const c = this.consents.get(decodeURIComponent(del[1]!));
      if (!c) return this.send(res, 404, {});
      c.status = 'DELETED';
      return this.send(res, 204);
    }
    return this.send(res, 404, { errors: [{ code: 'NOT_FOUND' }] });
  }
}
