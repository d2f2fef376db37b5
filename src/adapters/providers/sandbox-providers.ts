import { generateKeyPairSync, randomBytes } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { TLSSocket } from 'node:tls';
import type { Catalog, ProviderDef } from '../../providers/catalog.ts';
import { hmacRequestSignature, sameHex, verifyEs256Jwt } from './signing.ts';
import { issueCertificate, type Issued, loadIssued, type SavedIssued, saveIssued } from './x509.ts';
import type { Credential } from './http-provider.ts';
import { type OAuthSaved, SandboxOAuth } from './sandbox-oauth.ts';
import { SandboxSignup, type SignupSaved } from './sandbox-signup.ts';
import { listenStable, type SandboxHome, StateFile } from '../sandbox-home.ts';

// The sandbox providers: one server on loopback serving every catalog provider
// whose test endpoint is `sandbox:` (plain HTTP, at /<slug>/...) or
// `sandbox-tls:` (HTTPS requiring a client certificate from the sandbox's own
// test CA, at /<slug>/...). Each provider authenticates as its auth_type says,
// with credentials the sandbox issued (issueCredential, or
// POST /_sandbox/<slug>/credentials), and serves a few tools over small
// in-memory state. Fault modes per provider: slow (held until released or
// 30 s), 5xx, 401, redirect. The HTTP provider adapter talks to it exactly as
// to a live provider. The signup site's outbox (the codes it "e-mailed") is
// served like a local mail catcher: GET /_sandbox/outbox?email= (JSON, newest
// first) and /_sandbox/outbox.html (a page for a person).

export type Fault = 'slow' | '5xx' | '401' | 'redirect';
type Account = { id: string; name: string; slug: string; data: Map<string, Record<string, unknown>[]> };
type Reply = { status: number; body?: unknown; headers?: Record<string, string> };
/** What the sandbox providers keep under DATA_DIR across restarts: their test CA and certificate, accounts and credentials, the signup site and the OAuth servers. */
type Saved = {
  ca: SavedIssued;
  server: SavedIssued;
  accounts: [string, Omit<Account, 'data'> & { data: [string, Record<string, unknown>[]][] }][];
  jwtKeys: [string, string][];
  hmacSecrets: [string, string][];
  signup: SignupSaved;
  oauth: OAuthSaved;
};

const SLOW_HOLD_MS = 30_000;
/** The most requests `seen` remembers (a long-running sandbox must not grow without bound). */
const SEEN_MAX = 1_000;

export class SandboxProviders {
  readonly faults = new Map<string, Fault>();
  /** The latest requests the sandbox saw (provider, method, headers, path with query, body): tests read it. */
  readonly seen: { slug: string; method: string; headers: http.IncomingHttpHeaders; path: string; body: string }[] = [];
  private readonly accounts = new Map<string, Account>(); // `${slug}:${credential key}` → account
  private readonly jwtKeys = new Map<string, string>(); // `${slug}:${kid}` → public key PEM
  private readonly hmacSecrets = new Map<string, string>(); // `${slug}:${key_id}` → secret
  private readonly held = new Set<() => void>();
  private httpServer: http.Server | undefined;
  private httpsServer: https.Server | undefined;
  readonly caCert: Issued;
  private readonly serverCert: Issued;
  url = '';
  tlsUrl = '';
  /** The OAuth authorization servers of the `oauth` providers (authorize page, token endpoint with PKCE). */
  readonly oauth: SandboxOAuth;
  /** The signup site of the `api_key` providers (browser signup runs): /_sandbox/<slug>/signup. */
  readonly signup: SandboxSignup;

  private readonly state: StateFile<Saved> | undefined;
  private readonly home: SandboxHome | undefined;

  /** With a home, accounts, credentials, the outbox and the test CA survive a restart, on the same ports. */
  constructor(
    private readonly catalog: Catalog,
    opts: { now?: () => Date; home?: SandboxHome } = {},
  ) {
    this.oauth = new SandboxOAuth(opts.now ?? (() => new Date()), (slug, email) => this.accountFor(slug, email));
    this.signup = new SandboxSignup((slug, email) => String(this.issueCredential(slug, email)), opts.now);
    this.home = opts.home;
    this.state = opts.home ? new StateFile<Saved>(opts.home, 'providers') : undefined;
    const saved = this.state?.load();
    this.caCert = saved ? loadIssued(saved.ca) : issueCertificate({ commonName: 'Sandbox Providers Test CA', ca: true, days: 3650 });
    this.serverCert = saved ? loadIssued(saved.server) : issueCertificate({ commonName: 'localhost', issuer: this.caCert, altNames: ['localhost', '127.0.0.1'] });
    if (saved) {
      for (const [k, a] of saved.accounts) this.accounts.set(k, { ...a, data: new Map(a.data) });
      for (const [k, v] of saved.jwtKeys) this.jwtKeys.set(k, v);
      for (const [k, v] of saved.hmacSecrets) this.hmacSecrets.set(k, v);
      this.signup.restore(saved.signup);
      this.oauth.restore(saved.oauth);
    }
  }

  /** Writes the state file (no-op without a home): after every request that may change something, and every credential issued. */
  private persist(): void {
    this.state?.save({
      ca: saveIssued(this.caCert),
      server: saveIssued(this.serverCert),
      accounts: [...this.accounts].map(([k, a]) => [k, { ...a, data: [...a.data] }]),
      jwtKeys: [...this.jwtKeys],
      hmacSecrets: [...this.hmacSecrets],
      signup: this.signup.snapshot(),
      oauth: this.oauth.snapshot(),
    });
  }

  get caPem(): string {
    return this.caCert.certPem;
  }

  async start(): Promise<{ http: string; https: string }> {
    const serve = (tls: boolean) => (req: http.IncomingMessage, res: http.ServerResponse) =>
      void this.handle(req, res, tls).finally(() => {
        if (req.method !== 'GET') this.persist();
      });
    this.httpServer = http.createServer(serve(false));
    this.httpsServer = https.createServer({ key: this.serverCert.keyPem, cert: this.serverCert.certPem, ca: [this.caCert.certPem], requestCert: true, rejectUnauthorized: false }, serve(true));
    this.url = `http://127.0.0.1:${await listenStable(this.httpServer, this.home, 'providers', 'the sandbox providers')}`;
    this.tlsUrl = `https://127.0.0.1:${await listenStable(this.httpsServer, this.home, 'providers-tls', 'the sandbox providers (mutual TLS)')}`;
    this.persist();
    return { http: this.url, https: this.tlsUrl };
  }

  async stop(): Promise<void> {
    this.releaseSlow();
    for (const s of [this.httpServer, this.httpsServer]) {
      s?.closeAllConnections();
      await new Promise<void>((r) => (s ? s.close(() => r()) : r()));
    }
  }

  /** The mail the signup site sent to an address (verification codes), oldest first. */
  outbox(email: string) {
    return this.signup.outbox(email);
  }

  /** Answers every request held by the `slow` fault (with a 200 nobody waits for any more). */
  releaseSlow(): void {
    this.signup.release();
    for (const release of this.held) release();
    this.held.clear();
  }

  /** A fresh sandbox account of a provider and the credential that authenticates as it. */
  issueCredential(slug: string, name = `Sandbox ${slug} account`): Credential {
    const p = this.catalog.get(slug);
    if (!p) throw new Error(`no provider ${slug}`);
    const account: Account = { id: `acct_${randomBytes(6).toString('hex')}`, name, slug, data: new Map() };
    const rand = (n = 16) => randomBytes(n).toString('hex');
    let key: string;
    let cred: Credential;
    switch (p.auth_type) {
      case 'api_key':
        cred = `${slug.slice(0, 4)}_sk_${rand()}`;
        key = cred;
        break;
      case 'path_secret': {
        const parts = Object.fromEntries(p.fields.map((f) => [f.name, rand(10)]));
        cred = parts;
        key = p.fields.map((f) => parts[f.name]).join('/');
        break;
      }
      case 'cert': {
        const c = issueCertificate({ commonName: name, organization: 'Sandbox Customer', issuer: this.caCert });
        cred = { certificate: c.certPem, private_key: c.keyPem };
        key = c.cert.fingerprint256;
        break;
      }
      case 'hmac_signed': {
        cred = { key_id: `kid_${rand(6)}`, signing_secret: rand(24) };
        this.hmacSecrets.set(`${slug}:${cred.key_id}`, cred.signing_secret!);
        key = cred.key_id!;
        break;
      }
      case 'jwt_ecdsa': {
        const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
        cred = { key_id: `kid_${rand(6)}`, private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
        this.jwtKeys.set(`${slug}:${cred.key_id}`, publicKey.export({ type: 'spki', format: 'pem' }).toString());
        key = cred.key_id!;
        break;
      }
      case 'two_header': {
        cred = Object.fromEntries(p.fields.map((f) => [f.name, rand(12)]));
        key = p.fields.map((f) => (cred as Record<string, string>)[f.name]).join(':');
        break;
      }
      case 'oauth':
        cred = { access_token: `at_${rand(20)}` };
        key = cred.access_token!;
        break;
      default:
        throw new Error(`${slug} (${p.auth_type}) takes no credential`);
    }
    this.accounts.set(`${slug}:${key}`, account);
    this.persist();
    return cred;
  }

  /** Registers the platform's OAuth client at every sandbox `oauth` provider, redirecting to `callbackUrl`. */
  platformOAuthClients(callbackUrl: string): Record<string, { client_id: string; client_secret: string }> {
    const out: Record<string, { client_id: string; client_secret: string }> = {};
    for (const p of this.catalog.providers) {
      if (p.auth_type !== 'oauth' || p.endpoints.test !== 'sandbox:') continue;
      const c = this.oauth.clientFor(p.id, [callbackUrl]);
      out[p.id] = { client_id: c.client_id, client_secret: c.client_secret };
    }
    this.persist();
    return out;
  }

  /** The sandbox account of an OAuth provider for a person's e-mail (created on first consent). */
  private accountFor(slug: string, email: string): { id: string; name: string } {
    for (const a of this.accounts.values()) if (a.slug === slug && a.name === email) return a;
    const a: Account = { id: `acct_${randomBytes(6).toString('hex')}`, name: email, slug, data: new Map() };
    this.accounts.set(`${slug}:email:${email}`, a);
    return a;
  }

  /** POST /_sandbox/mail {to, subject, text, code}: 204 once it is in the outbox, 400 when it is not a message. */
  private acceptMail(raw: string, res: http.ServerResponse): void {
    let m: unknown;
    try {
      m = JSON.parse(raw);
    } catch {
      m = null;
    }
    const str = (k: string, max: number) => (typeof m === 'object' && m !== null && typeof (m as Record<string, unknown>)[k] === 'string' && ((m as Record<string, string>)[k]!).length <= max ? (m as Record<string, string>)[k]! : null);
    const to = str('to', 254), subject = str('subject', 200), text = str('text', 10_000), code = str('code', 64);
    if (!to || subject === null || text === null || code === null) return this.send(res, { status: 400, body: { error: 'invalid_mail' } });
    this.signup.deliver({ to, subject, text, code });
    return this.send(res, { status: 204 });
  }

  private send(res: http.ServerResponse, r: Reply): void {
    res.writeHead(r.status, { ...(r.body !== undefined ? { 'content-type': 'application/json' } : {}), ...r.headers });
    res.end(r.body !== undefined ? JSON.stringify(r.body) : undefined);
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse, tls: boolean): Promise<void> {
    let raw = '';
    for await (const c of req) raw += c;
    const url = new URL(req.url ?? '/', 'http://sandbox');
    const segs = url.pathname.split('/').filter(Boolean);
    // The signup site's outbox, for a person finishing a signup run (and for tests).
    if (!tls && req.method === 'GET' && segs[0] === '_sandbox' && segs.length === 2 && (segs[1] === 'outbox' || segs[1] === 'outbox.html')) return this.signup.serveOutbox(segs[1] === 'outbox.html', url, res);
    // The sandbox mail adapter (src/adapters/mail/sandbox.ts) drops the service's own mail here.
    if (!tls && req.method === 'POST' && segs[0] === '_sandbox' && segs[1] === 'mail' && segs.length === 2) return this.acceptMail(raw, res);
    // Operator helper for `npm start`: mint a sandbox credential over HTTP.
    if (!tls && req.method === 'POST' && segs[0] === '_sandbox' && segs[2] === 'credentials' && segs.length === 3) {
      try {
        return this.send(res, { status: 201, body: { server_id: segs[1], secret: this.issueCredential(segs[1]!) } });
      } catch (err) {
        return this.send(res, { status: 400, body: { error: (err as Error).message } });
      }
    }
    if (!tls && segs[0] === '_sandbox' && segs[2] === 'signup' && this.catalog.get(segs[1] ?? '')?.auth_type === 'api_key') return this.signup.handle(segs[1]!, segs.length > 3 ? `/${segs.slice(3).join('/')}` : '', req.method ?? 'GET', url, raw, res);
    const p = this.catalog.get(segs[0] ?? '');
    const wanted = tls ? 'sandbox-tls:' : 'sandbox:';
    if (!p || p.endpoints.test !== wanted) return this.send(res, { status: 404, body: { error: 'not_found', message: 'no such sandbox provider' } });
    this.seen.push({ slug: p.id, method: req.method ?? 'GET', headers: req.headers, path: `${url.pathname}${url.search}`, body: raw });
    if (this.seen.length > SEEN_MAX) this.seen.splice(0, this.seen.length - SEEN_MAX);
    if (p.auth_type === 'oauth' && segs[1] === 'oauth') return this.oauth.handle(p.id, segs.slice(2).join('/'), req.method ?? 'GET', url, raw, res);
    const fault = this.faults.get(p.id);
    if (fault === 'slow') {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, SLOW_HOLD_MS);
        this.held.add(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      if (res.destroyed) return;
    }
    if (fault === '5xx') return this.send(res, { status: 503, body: { error: 'service_unavailable', message: 'the sandbox provider is down for maintenance' } });
    if (fault === '401') return this.send(res, { status: 401, body: { error: 'unauthorized', message: 'API key revoked by the provider' } });
    if (fault === 'redirect') return this.send(res, { status: 302, headers: { location: `https://login.${p.id}.example/moved` } });

    let rest = segs.slice(1);
    const auth = this.authenticate(p, req, url, raw, rest, tls);
    if ('error' in auth) return this.send(res, { status: 401, body: { error: 'unauthorized', message: auth.error } });
    rest = auth.rest;
    let body: Record<string, unknown> = {};
    try {
      body = raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
    } catch {
      return this.send(res, { status: 400, body: { error: 'bad_request', message: 'body is not JSON' } });
    }
    return this.send(res, this.route(p, auth.account, req.method ?? 'GET', `/${rest.join('/')}`, url.searchParams, body));
  }

  private authenticate(p: ProviderDef, req: http.IncomingMessage, url: URL, raw: string, rest: string[], tls: boolean): { account: Account | null; rest: string[] } | { error: string } {
    const h = (name: string) => {
      const v = req.headers[name];
      return typeof v === 'string' ? v : undefined;
    };
    const find = (key: string) => this.accounts.get(`${p.id}:${key}`);
    switch (p.auth_type) {
      case 'none':
        return { account: null, rest };
      case 'api_key': {
        const f = p.fields[0]!;
        const v = h(f.header_name!);
        const a = v?.startsWith(f.value_prefix ?? '') ? find(v.slice((f.value_prefix ?? '').length)) : undefined;
        return a ? { account: a, rest } : { error: v ? 'Invalid API key provided' : `missing ${f.header_name} header` };
      }
      case 'two_header': {
        const vals = p.fields.map((f) => h(f.header_name!));
        if (vals.some((v) => !v)) return { error: `both ${p.fields.map((f) => f.header_name).join(' and ')} are required` };
        const a = find(vals.join(':'));
        return a ? { account: a, rest } : { error: 'unknown client id or secret' };
      }
      case 'path_secret': {
        const n = p.fields.length;
        const a = find(rest.slice(0, n).map(decodeURIComponent).join('/'));
        return a ? { account: a, rest: rest.slice(n) } : { error: 'invalid company token or access secret' };
      }
      case 'cert': {
        const sock = req.socket as TLSSocket;
        if (!tls || !sock.authorized) return { error: `client certificate required (${tls ? sock.authorizationError ?? 'none presented' : 'not TLS'})` };
        const a = find(sock.getPeerX509Certificate()?.fingerprint256 ?? '');
        return a ? { account: a, rest } : { error: 'certificate not enrolled with any account' };
      }
      case 'hmac_signed': {
        const keyId = h(p.fields[0]!.header_name!) ?? '';
        const ts = h(`x-${p.id}-timestamp`) ?? '';
        const sig = h(`x-${p.id}-signature`) ?? '';
        const secret = this.hmacSecrets.get(`${p.id}:${keyId}`);
        if (!secret) return { error: 'unknown key id' };
        if (!/^\d+$/.test(ts) || Math.abs(Date.now() / 1000 - Number(ts)) > 300) return { error: 'timestamp outside the 5 minute window' };
        const expected = hmacRequestSignature(secret, ts, req.method ?? 'GET', `${url.pathname}${url.search}`, raw);
        if (!sameHex(sig, expected)) return { error: 'signature mismatch' };
        return { account: find(keyId)!, rest };
      }
      case 'jwt_ecdsa': {
        const token = /^Bearer (.+)$/.exec(h('authorization') ?? '')?.[1];
        if (!token) return { error: 'bearer token required' };
        let kid = '';
        try {
          kid = String(JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString('utf8')).kid ?? '');
        } catch {
          return { error: 'malformed token' };
        }
        const pub = this.jwtKeys.get(`${p.id}:${kid}`);
        if (!pub) return { error: 'unknown key id' };
        const v = verifyEs256Jwt(token, pub, p.id, new Date());
        return v.ok ? { account: find(kid)!, rest } : { error: v.reason };
      }
      case 'oauth': {
        const token = /^Bearer (.+)$/.exec(h('authorization') ?? '')?.[1];
        const issued = token ? this.oauth.accessToken(p.id, token) : undefined;
        const a = token ? (issued ? this.accounts.get(`${p.id}:email:${issued}`) : find(token)) : undefined;
        return a ? { account: a, rest } : { error: 'invalid or expired access token' };
      }
      default:
        return { error: 'unsupported' };
    }
  }

  private route(p: ProviderDef, a: Account | null, method: string, path: string, q: URLSearchParams, body: Record<string, unknown>): Reply {
    const key = `${method} ${path}`;
    const list = (name: string) => {
      if (!a) return [];
      let l = a.data.get(name);
      if (!l) a.data.set(name, (l = []));
      return l;
    };
    const create = (name: string, prefix: string, obj: Record<string, unknown>): Reply => {
      const row = { id: `${prefix}_${randomBytes(6).toString('hex')}`, ...obj, created_at: new Date().toISOString() };
      list(name).unshift(row);
      return { status: 201, body: row };
    };
    const one = (name: string, id: string): Reply => {
      const row = list(name).find((r) => r.id === id);
      return row ? { status: 200, body: row } : { status: 404, body: { error: 'not_found', message: `no ${name.replace(/s$/, '')} ${id}` } };
    };
    const limit = Math.max(1, Math.min(100, Number(q.get('limit') ?? 10) || 10));
    const me = a ? { id: a.id, name: a.name, plan: 'sandbox' } : null;
    const m = (re: RegExp) => re.exec(key);
    let r: RegExpExecArray | null;
    switch (p.id) {
      case 'acme-payments':
        if (key === 'GET /v1/account') return { status: 200, body: { ...me, country: 'BR' } };
        if (key === 'POST /v1/charges') return create('charges', 'ch', { amount_minor: body.amount_minor, currency: body.currency, description: body.description ?? null, status: 'succeeded', metadata: body.metadata ?? {} });
        if ((r = m(/^GET \/v1\/charges\/([^/]+)$/))) return one('charges', decodeURIComponent(r[1]!));
        if (key === 'GET /v1/charges') return { status: 200, body: { data: list('charges').slice(0, limit) } };
        break;
      case 'nota-facil':
        if (key === 'GET /company') return { status: 200, body: { ...me, cnpj: '11222333000181' } };
        if (key === 'POST /invoices') return create('invoices', 'nf', { customer_document: body.customer_document, amount_minor: body.amount_minor, description: body.description ?? null, status: 'authorized' });
        if ((r = m(/^GET \/invoices\/([^/]+)$/))) return one('invoices', decodeURIComponent(r[1]!));
        break;
      case 'banco-seguro':
        if (key === 'GET /accounts/me') return { status: 200, body: { ...me, branch: '0001' } };
        if (key === 'GET /accounts/me/balance') return { status: 200, body: { available_minor: '1250000', currency: 'BRL' } };
        if (key === 'GET /accounts/me/statements') return { status: 200, body: { data: Array.from({ length: Math.min(limit, 5) }, (_, i) => ({ id: `st_${i + 1}`, amount_minor: String(1000 * (i + 1)), description: `Pix ${i + 1}` })) } };
        break;
      case 'ledgerly':
        if (key === 'GET /ping') return { status: 200, body: { pong: true } };
        if (key === 'POST /entries') return create('entries', 'je', { debit_account: body.debit_account, credit_account: body.credit_account, amount_minor: body.amount_minor });
        if (key === 'GET /entries') return { status: 200, body: { data: list('entries').slice(0, limit) } };
        break;
      case 'shipfast':
        if (key === 'GET /v2/whoami') return { status: 200, body: { ...me, carrier_accounts: 2 } };
        if (key === 'POST /v2/quotes') return { status: 200, body: { price_minor: 500 + Math.ceil(Number(body.weight_grams ?? 0) / 100) * 25, currency: 'USD', from: body.from_postal_code, to: body.to_postal_code } };
        break;
      case 'kambio':
        if (key === 'GET /me') return { status: 200, body: me };
        if ((r = m(/^GET \/rates\/([A-Z]{3})\/([A-Z]{3})$/))) {
          const usd: Record<string, number> = { USD: 1, MXN: 17.1, BRL: 5.3, EUR: 0.92 };
          const [b, qu] = [r[1]!, r[2]!];
          if (!(b in usd) || !(qu in usd)) return { status: 422, body: { error: 'unsupported_pair' } };
          return { status: 200, body: { base: b, quote: qu, rate: Math.round((usd[qu]! / usd[b]!) * 1e6) / 1e6 } };
        }
        break;
      case 'clima':
        if (key === 'GET /status') return { status: 200, body: { status: 'ok' } };
        if (key === 'GET /forecast') {
          const city = q.get('city') ?? '';
          const t = [...city].reduce((s, c) => s + c.charCodeAt(0), 0);
          return { status: 200, body: { city, min_c: 12 + (t % 8), max_c: 22 + (t % 10), rain_probability: (t % 100) / 100 } };
        }
        break;
      case 'contahub':
        if (key === 'GET /api/me') return { status: 200, body: me };
        if (key === 'GET /api/accounts') return { status: 200, body: { data: [{ code: '1.1', name: 'Caixa' }, { code: '2.1', name: 'Fornecedores' }] } };
        break;
    }
    return { status: 404, body: { error: 'not_found', message: `no route ${key}` } };
  }
}
