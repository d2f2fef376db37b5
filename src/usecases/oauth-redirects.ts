// OAuth redirect URI rules (spec Part 4.1; RFC 8252 §7.3 for loopback
// clients): which URIs a client may register, and which registered URI a
// request's redirect_uri names. Used by client registration and consent.

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/** Registration rule (spec Part 4.1): absolute https, http only on loopback hosts, no fragment, no credentials. */
export function redirectUriProblem(uri: string): string | null {
  if (uri.includes('#')) return 'a redirect URI must not contain a fragment';
  if (!URL.canParse(uri)) return 'a redirect URI must be absolute';
  const u = new URL(uri);
  if (u.username || u.password) return 'a redirect URI must not carry credentials';
  if (u.protocol === 'https:') return null;
  if (u.protocol === 'http:' && LOOPBACK_HOSTS.has(u.hostname)) return null;
  if (u.protocol === 'http:') return 'http is allowed only on loopback hosts (localhost, 127.0.0.1, [::1])';
  return 'a redirect URI must use https (or http on a loopback host)';
}

/** Exact string match, except a loopback http URI matches on any port (RFC 8252 §7.3). */
export function redirectUriMatches(registered: readonly string[], requested: string): boolean {
  if (registered.includes(requested)) return true;
  if (!URL.canParse(requested) || requested.includes('#')) return false;
  const r = new URL(requested);
  if (r.protocol !== 'http:' || !LOOPBACK_HOSTS.has(r.hostname) || r.username || r.password) return false;
  const portless = (u: URL) => `${u.protocol}//${u.hostname}${u.pathname}${u.search}`;
  return registered.some((x) => URL.canParse(x) && new URL(x).protocol === 'http:' && portless(new URL(x)) === portless(r));
}
