import { randomBytes, randomInt } from 'node:crypto';
import type http from 'node:http';

// The sandbox providers' signup site (for browser signup runs): page 1 takes an
// e-mail and a name, page 2 asks for the code "we e-mailed" (written to the
// sandbox outbox), page 3 shows the new account's API key.
// The outbox is what a local mail catcher shows: every message the site sent,
// served by the sandbox providers at /_sandbox/outbox (JSON, newest first,
// `?email=` for one address) and /_sandbox/outbox.html (a page for a person).
// Fault modes per provider: `no_key` (page 3 shows no key), `broken_form`
// (page 1 has no form), `hang` (page 2 never answers the code), `no_resend`
// (page 2 has no resend button).

export type SignupFault = 'no_key' | 'broken_form' | 'hang' | 'no_resend';
export type OutboxMessage = { id: string; to: string; subject: string; text: string; code: string; sent_at: string };
/** The most messages the outbox keeps (the oldest leave first). */
const OUTBOX_MAX = 500;
type Pending = { slug: string; email: string; name: string; code: string; key: string | null };
/** What the signup site keeps across restarts (SandboxProviders saves it with its own state). */
export type SignupSaved = { mail: OutboxMessage[]; sent: number; pending: [string, Pending][] };

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const page = (title: string, body: string) => `<!doctype html><html><head><meta charset="utf-8"><title>${esc(title)}</title></head><body><h1>${esc(title)}</h1>${body}</body></html>`;

export class SandboxSignup {
  readonly faults = new Map<string, SignupFault>();
  private readonly mail: OutboxMessage[] = [];
  private sent = 0;
  private readonly pending = new Map<string, Pending>();
  private readonly held = new Set<http.ServerResponse>();

  constructor(
    private readonly issueKey: (slug: string, email: string) => string,
    private readonly now: () => Date = () => new Date(),
  ) {}

  snapshot(): SignupSaved {
    return { mail: this.mail, sent: this.sent, pending: [...this.pending] };
  }

  restore(s: SignupSaved): void {
    this.mail.push(...s.mail);
    this.sent = s.sent;
    for (const [id, p] of s.pending) this.pending.set(id, p);
  }

  /** The messages sent to an address, oldest first. */
  outbox(email: string): OutboxMessage[] {
    return this.mail.filter((m) => m.to.toLowerCase() === email.toLowerCase());
  }

  /** The messages sent (to one address when given), newest first. */
  newestFirst(email?: string): OutboxMessage[] {
    return (email ? this.outbox(email) : [...this.mail]).reverse();
  }

  release(): void {
    for (const r of this.held) r.destroy();
    this.held.clear();
  }

  /** A message another part of the service "e-mailed" (the dashboard's sign-in codes, through the sandbox mail adapter). */
  deliver(m: { to: string; subject: string; text: string; code: string }): void {
    this.mail.push({ id: `msg_${++this.sent}`, to: m.to, subject: m.subject, text: m.text, code: m.code, sent_at: this.now().toISOString() });
    if (this.mail.length > OUTBOX_MAX) this.mail.splice(0, this.mail.length - OUTBOX_MAX);
  }

  private sendCode(p: Pending): void {
    p.code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    const subject = `Your ${p.slug} verification code`;
    this.mail.push({ id: `msg_${++this.sent}`, to: p.email, subject, text: `Your ${p.slug} verification code is ${p.code}. Enter it on the sign-up page to finish creating your account.`, code: p.code, sent_at: this.now().toISOString() });
    if (this.mail.length > OUTBOX_MAX) this.mail.splice(0, this.mail.length - OUTBOX_MAX);
  }

  /** GET /_sandbox/outbox (JSON) or /_sandbox/outbox.html (a page), `?email=` for one address. */
  serveOutbox(html: boolean, url: URL, res: http.ServerResponse): void {
    const email = (url.searchParams.get('email') ?? '').trim() || null;
    const messages = this.newestFirst(email ?? undefined);
    const headers = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' };
    if (!html) {
      res.writeHead(200, { ...headers, 'content-type': 'application/json' });
      return void res.end(JSON.stringify({ email, count: messages.length, messages }));
    }
    const rows = messages
      .map((m) => `<tr class="message"><td><time>${esc(m.sent_at)}</time></td><td class="to">${esc(m.to)}</td><td class="subject">${esc(m.subject)}</td><td><code class="code">${esc(m.code)}</code></td><td class="text">${esc(m.text)}</td></tr>`)
      .join('');
    const body =
      `<p>Every e-mail the sandbox providers sent (verification codes of sign-ups), newest first. Nothing here leaves this machine.</p>` +
      `<form method="get" action="/_sandbox/outbox.html"><label>Address <input id="email" name="email" type="email" value="${esc(email ?? '')}"></label><button id="show" type="submit">Show</button> <a href="/_sandbox/outbox.html">all</a></form>` +
      (messages.length
        ? `<table><thead><tr><th>Sent</th><th>To</th><th>Subject</th><th>Code</th><th>Message</th></tr></thead><tbody>${rows}</tbody></table>`
        : `<p id="empty">No messages${email ? ` to ${esc(email)}` : ''} yet. Reload after the sign-up asks for its code.</p>`);
    res.writeHead(200, { ...headers, 'content-type': 'text/html; charset=utf-8', 'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'" });
    res.end(page('Sandbox outbox', body));
  }

  /** `rest` is the path after /_sandbox/<slug>/signup. */
  handle(slug: string, rest: string, method: string, url: URL, raw: string, res: http.ServerResponse): void {
    const html = (status: number, body: string) => {
      res.writeHead(status, { 'content-type': 'text/html; charset=utf-8' });
      res.end(body);
    };
    const redirect = (to: string) => {
      res.writeHead(303, { location: to });
      res.end();
    };
    const form = new URLSearchParams(raw);
    const base = `/_sandbox/${slug}/signup`;
    const fault = this.faults.get(slug);
    const p = this.pending.get(url.searchParams.get('s') ?? form.get('s') ?? '');
    if (rest === '' && method === 'GET') {
      if (fault === 'broken_form') return html(200, page(`Sign up to ${slug}`, '<p>Sign-ups are closed.</p>'));
      return html(200, page(`Sign up to ${slug}`, `<form method="post" action="${base}"><label>E-mail <input id="email" name="email" type="email"></label><label>Name <input id="name" name="name"></label><button id="submit" type="submit">Create account</button></form>`));
    }
    if (rest === '' && method === 'POST') {
      const email = (form.get('email') ?? '').trim();
      if (!/^[^@\s]+@[^@\s]+$/.test(email)) return html(400, page('Sign up', '<p id="error">Enter a valid e-mail.</p>'));
      const id = randomBytes(12).toString('hex');
      const pend: Pending = { slug, email, name: (form.get('name') ?? '').trim(), code: '', key: null };
      this.pending.set(id, pend);
      this.sendCode(pend);
      return redirect(`${base}/verify?s=${id}`);
    }
    if (!p || p.slug !== slug) return html(404, page('Not found', '<p>Unknown sign-up.</p>'));
    const sid = url.searchParams.get('s') ?? form.get('s') ?? '';
    const verifyForm = (error: string) =>
      page(
        'Enter the code we e-mailed',
        `${error ? `<p id="error">${esc(error)}</p>` : ''}<p id="prompt">We sent a 6-digit code to ${esc(p.email)}.</p><form method="post" action="${base}/verify"><input type="hidden" name="s" value="${sid}"><input id="code" name="code" inputmode="numeric"><button id="verify" type="submit">Verify</button></form>${fault === 'no_resend' ? '' : `<form method="post" action="${base}/resend"><input type="hidden" name="s" value="${sid}"><button id="resend" type="submit">Resend the code</button></form>`}`,
      );
    if (rest === '/verify' && method === 'GET') return html(200, verifyForm(''));
    if (rest === '/resend' && method === 'POST') {
      this.sendCode(p);
      return redirect(`${base}/verify?s=${sid}`);
    }
    if (rest === '/verify' && method === 'POST') {
      if (fault === 'hang') {
        this.held.add(res);
        return;
      }
      if ((form.get('code') ?? '').trim() !== p.code) return html(200, verifyForm('That code is not right.'));
      p.key ??= this.issueKey(slug, p.email);
      return redirect(`${base}/done?s=${sid}`);
    }
    if (rest === '/done' && method === 'GET' && p.key) {
      if (fault === 'no_key') return html(200, page('Welcome', '<p>Your account is ready. Your key will be sent later.</p>'));
      return html(200, page('Welcome', `<p>Your account is ready. Your API key:</p><code id="api-key">${esc(p.key)}</code>`));
    }
    return html(404, page('Not found', '<p>No such page.</p>'));
  }
}
