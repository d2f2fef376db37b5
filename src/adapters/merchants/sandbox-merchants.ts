import { randomBytes, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import { listenStable, type SandboxHome, StateFile } from '../sandbox-home.ts';
import { HOSTED_MERCHANTS, type HostedMerchant } from '../../../events/hosted-connect.ts';
import { SANDBOX_SESSION_COOKIE, type MerchantSites } from './sites.ts';

// The sandbox shopping merchants for hosted-browser connect: one server on
// loopback serving /merchant-a/... and /merchant-b/...: a login page
// (username, password), a session cookie on success, a logged-in account page.
// Each knows one test user (SANDBOX_MERCHANT_USER). The login page has a fixed
// layout (LOGIN_LAYOUT, CSS pixels from the top left of the viewport), so a
// test can click a field in a live-view image by its coordinates.

export const SANDBOX_MERCHANT_USER = { username: 'shopper', password: 'correct-horse-battery' } as const;

/** Where the login form's parts are on the page (CSS px): x, y of the top left corner, width, height. */
export const LOGIN_LAYOUT = {
  username: { x: 40, y: 140, w: 320, h: 40 },
  password: { x: 40, y: 230, w: 320, h: 40 },
  submit: { x: 40, y: 310, w: 160, h: 44 },
} as const;

const NAMES: Record<HostedMerchant, string> = { 'merchant-a': 'Merchant A', 'merchant-b': 'Merchant B' };
const SESSIONS_MAX = 1_000;

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const box = (b: { x: number; y: number; w: number; h: number }) => `position:absolute;left:${b.x}px;top:${b.y}px;width:${b.w}px;height:${b.h}px;box-sizing:border-box;font-size:18px`;

function loginPage(m: HostedMerchant, error: string): string {
  const L = LOGIN_LAYOUT;
  return `<!doctype html><html><head><meta charset="utf-8"><title>${NAMES[m]} — Sign in</title><style>body{margin:0;font-family:sans-serif}label{position:absolute;left:40px;font-size:16px}</style></head><body>
<h1 style="position:absolute;left:40px;top:20px;margin:0">Sign in to ${NAMES[m]}</h1>
${error ? `<p id="error" style="position:absolute;left:40px;top:70px;margin:0;color:#b00">${esc(error)}</p>` : ''}
<form method="post" action="/${m}/login">
<label for="username" style="top:${L.username.y - 24}px">Username</label><input id="username" name="username" autocomplete="username" style="${box(L.username)}">
<label for="password" style="top:${L.password.y - 24}px">Password</label><input id="password" name="password" type="password" autocomplete="current-password" style="${box(L.password)}">
<button id="submit" type="submit" style="${box(L.submit)}">Sign in</button>
</form></body></html>`;
}

const accountPage = (m: HostedMerchant, user: string) =>
  `<!doctype html><html><head><meta charset="utf-8"><title>${NAMES[m]} — Your account</title></head><body><h1>Your ${NAMES[m]} account</h1><p id="signed-in">Signed in as ${esc(user)}</p></body></html>`;

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export class SandboxMerchants {
  /** Live sessions per merchant: cookie value → username. Tests read who is signed in. */
  private readonly sessions = new Map<HostedMerchant, Map<string, string>>(HOSTED_MERCHANTS.map((m) => [m, new Map()]));
  private server: http.Server | undefined;
  url = '';
  private readonly state: StateFile<[HostedMerchant, [string, string][]][]> | undefined;

  /** With a home, sign-in sessions survive a restart, on the same port. */
  constructor(private readonly home?: SandboxHome) {
    this.state = home ? new StateFile(home, 'merchants') : undefined;
    for (const [m, live] of this.state?.load() ?? []) for (const [token, user] of live) this.sessions.get(m)?.set(token, user);
  }

  async start(): Promise<string> {
    this.server = http.createServer((req, res) =>
      void this.handle(req, res).finally(() => {
        if (req.method !== 'GET') this.state?.save([...this.sessions].map(([m, live]) => [m, [...live]]));
      }),
    );
    this.url = `http://127.0.0.1:${await listenStable(this.server, this.home, 'merchants', 'the sandbox merchants')}`;
    return this.url;
  }

  async stop(): Promise<void> {
    const s = this.server;
    s?.closeAllConnections();
    await new Promise<void>((r) => (s ? s.close(() => r()) : r()));
  }

  /** The login pages and session cookie of both sandbox merchants. */
  sites(): MerchantSites {
    return Object.fromEntries(HOSTED_MERCHANTS.map((m) => [m, { loginUrl: `${this.url}/${m}/login`, sessionCookie: SANDBOX_SESSION_COOKIE }]));
  }

  /** Usernames with a live session at a merchant. */
  signedIn(m: HostedMerchant): string[] {
    return [...this.sessions.get(m)!.values()];
  }

  /** The session cookie values the merchant issued (tests check none leaks). */
  sessionCookies(m: HostedMerchant): string[] {
    return [...this.sessions.get(m)!.keys()];
  }

  private userOf(m: HostedMerchant, req: http.IncomingMessage): string | undefined {
    for (const part of (req.headers.cookie ?? '').split(';')) {
      const i = part.indexOf('=');
      if (i > 0 && part.slice(0, i).trim() === SANDBOX_SESSION_COOKIE) {
        const u = this.sessions.get(m)!.get(part.slice(i + 1).trim());
        if (u) return u;
      }
    }
    return undefined;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    let raw = '';
    for await (const c of req) {
      raw += c;
      if (raw.length > 16_384) return void res.writeHead(413).end();
    }
    const url = new URL(req.url ?? '/', 'http://sandbox');
    const [slug, page, ...rest] = url.pathname.split('/').filter(Boolean);
    const m = HOSTED_MERCHANTS.find((x) => x === slug);
    const html = (status: number, body: string, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', ...headers });
      res.end(body);
    };
    const redirect = (to: string, headers: Record<string, string> = {}) => {
      res.writeHead(303, { location: to, ...headers });
      res.end();
    };
    if (!m || rest.length) return html(404, '<!doctype html><title>Not found</title><p>No such page.</p>');
    if (page === 'login' && req.method === 'GET') return this.userOf(m, req) ? redirect(`/${m}/account`) : html(200, loginPage(m, ''));
    if (page === 'login' && req.method === 'POST') {
      const form = new URLSearchParams(raw);
      const ok = sameText(form.get('username') ?? '', SANDBOX_MERCHANT_USER.username) && sameText(form.get('password') ?? '', SANDBOX_MERCHANT_USER.password);
      if (!ok) return html(200, loginPage(m, 'That username and password do not match.'));
      const token = randomBytes(24).toString('base64url');
      const live = this.sessions.get(m)!;
      live.set(token, SANDBOX_MERCHANT_USER.username);
      if (live.size > SESSIONS_MAX) live.delete(live.keys().next().value!);
      return redirect(`/${m}/account`, { 'set-cookie': `${SANDBOX_SESSION_COOKIE}=${token}; Path=/${m}; HttpOnly; SameSite=Lax` });
    }
    if (page === 'account' && req.method === 'GET') {
      const user = this.userOf(m, req);
      return user ? html(200, accountPage(m, user)) : redirect(`/${m}/login`);
    }
    return html(404, '<!doctype html><title>Not found</title><p>No such page.</p>');
  }
}
