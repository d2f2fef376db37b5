// What a log line may say about a URL: the one rule every logger applies (the
// request log, the error log, start-up lines, the CLI). A capability in a path
// segment (the live view's token) and personal data in one (a Pix key: a CPF,
// an e-mail, a phone) are replaced by a marker, and so are the values of query
// parameters that carry secrets or personal data. The path's shape and the
// other parameters stay, so a line still says which route was called.

export const REDACTED = '[redacted]';

/**
 * Path segments to redact: each pattern is matched against consecutive
 * segments of a path; `*` matches any one segment, `!` is one to redact.
 */
const SEGMENT_PATTERNS: readonly (readonly string[])[] = [
  ['connect', 'live', '!'], // the hosted-connect live view (and its /frames, /input): whoever holds it drives the person's browser
  ['v1', 'consumers', '*', 'pix-keys', '!'], // a Pix key is a CPF/CNPJ, an e-mail or a phone number
  ['v1', 'consents', '!', 'submit'], // a directed-pay consent token: whoever holds it creates the mandate
];

/** Query parameters whose values are secrets or personal data. */
const SECRET_NAMES = new Set(['state', 'code', 'token', 'secret', 'identifier', 'document', 'key', 'password', 'email', 'phone', 'cpf', 'cnpj', 'signature', 'sig']);
const SECRET_SUFFIXES = ['_token', '_secret', '_key', '_document', '_password'];

export function isSecretParam(name: string): boolean {
  const n = name.toLowerCase();
  return SECRET_NAMES.has(n) || SECRET_SUFFIXES.some((s) => n.endsWith(s));
}

function redactPath(path: string): string {
  const segs = path.split('/');
  // Matched at any depth: a base path (PUBLIC_BASE_URL's) or a file path in a message may come first.
  for (let at = 1; at < segs.length; at++) {
    for (const pattern of SEGMENT_PATTERNS) {
      if (segs.length < at + pattern.length) continue;
      if (!pattern.every((p, i) => p === '*' || p === '!' || p === decodeSafe(segs[at + i]!).toLowerCase())) continue;
      pattern.forEach((p, i) => {
        if (p === '!' && segs[at + i] !== '') segs[at + i] = REDACTED;
      });
    }
  }
  return segs.join('/');
}

function decodeSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

function redactQuery(query: string): string {
  return query
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = decodeSafe((eq < 0 ? pair : pair.slice(0, eq)).replaceAll('+', ' '));
      return eq >= 0 && isSecretParam(name) ? `${pair.slice(0, eq)}=${REDACTED}` : pair;
    })
    .join('&');
}

/** A URL or a path-and-query as it may be logged. */
export function redactUrl(url: string): string {
  const hashAt = url.indexOf('#');
  const noHash = hashAt >= 0 ? url.slice(0, hashAt) : url;
  const q = noHash.indexOf('?');
  const beforeQuery = q >= 0 ? noHash.slice(0, q) : noHash;
  // An absolute URL: redact its path only (scheme, host and port stay).
  const origin = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i.exec(beforeQuery)?.[0] ?? '';
  const path = redactPath(beforeQuery.slice(origin.length));
  return origin + path + (q >= 0 ? `?${redactQuery(noHash.slice(q + 1))}` : '') + (hashAt >= 0 ? '#' + REDACTED : '');
}

// A URL or a path inside free text (a message, a stack, a JSON log line): from
// a scheme or a slash up to a space, a quote, an angle bracket or a backslash.
const URL_IN_TEXT = /[a-z][a-z0-9+.-]*:\/\/[^\s"'<>\\`]*|\/[^\s"'<>\\`]*/gi;

/** Free text with every URL and path in it redacted. */
export function redactText(text: string): string {
  return text.replace(URL_IN_TEXT, (m) => (m.includes('?') || m.includes('#') || m.length > 1 ? redactUrl(m) : m));
}

/** A log destination that redacts each line before writing it. */
export function redactingStream(dest: { write(line: string): unknown }): { write(line: string): void } {
  return { write: (line: string) => void dest.write(redactText(line)) };
}
