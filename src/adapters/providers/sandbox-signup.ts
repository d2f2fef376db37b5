import { randomBytes, randomInt } from 'node:crypto';
import type http from 'node:http';

// The sandbox providers' signup site (for browser signup runs): page 1 takes an
// e-mail and a name, page 2 asks for the code "we e-mailed" (written to the
// sandbox outbox, which tests read), page 3 shows the new account's API key.
// Fault modes per provider: `no_key` (page 3 shows no key), `broken_form`
// (page 1 has no form), `hang` (page 2 never answers the code), `no_resend`
// (page 2 has no resend button).

export type SignupFault = 'no_key' | 'broken_form' | 'hang' | 'no_resend';
export type OutboxMessage = { to: string; subject: string; code: string };
type Pending = { slug: string; email: string; name: string; code: string; key: string | null };

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const page = (title: string, body: string) => `<!doctype html><html><head><meta charset="utf-8"><title>${esc(title)}</title></head><body><h1>${esc(title)}</h1>${body}</body></html>`;

export class SandboxSignup {
  readonly faults = new Map<string, SignupFault>();
  private readonly mail = new Map<string, OutboxMessage[]>();
  private readonly pending = new Map<string, Pending>();
  private readonly held = new Set<http.ServerResponse>();

  constructor(private readonly issueKey: (slug: string, email: string) => string) {}

  /** The messages sent to an address, oldest first. */
  outbox(email: string): OutboxMessage[] {
    return [...(this.mail.get(email.toLowerCase()) ?? [])];
  }

  release(): void {
    for (const r of this.held) r.destroy();
    this.held.clear();
  }

  private sendCode(p: Pending): void {
    p.code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    const box = this.mail.get(p.email.toLowerCase()) ?? [];
    box.push({ to: p.email, subject: `Your ${p.slug} verification code`, code: p.code });
    this.mail.set(p.email.toLowerCase(), box.slice(-20));
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
