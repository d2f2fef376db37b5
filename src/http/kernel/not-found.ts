// A request no route takes, answered so that it says what to do: a path that
// exists under other methods is 405 `method_not_allowed` with `Allow` (RFC 9110
// section 15.5.6); an unknown path is 404 `not_found`, naming the nearest
// route ("did you mean GET /v1/projects?") when one is a few keystrokes away.

export type RegisteredRoute = { method: string; url: string };

/** The longest path a suggestion is looked for (a longer one is no typo). */
const SUGGEST_PATH_MAX_CHARS = 300;

type Pattern = { method: string; url: string; segments: string[] };

const segmentsOf = (path: string) => path.split('/').slice(1);
const isParam = (seg: string) => seg.startsWith(':') || seg === '*';

/** Whether a route pattern (`:name` parameters, a trailing `*`) takes a concrete path. */
function takes(p: Pattern, segs: string[]): boolean {
  if (p.segments.at(-1) === '*') return segs.length >= p.segments.length - 1 && p.segments.slice(0, -1).every((s, i) => isParam(s) || s === segs[i]);
  return p.segments.length === segs.length && p.segments.every((s, i) => (isParam(s) ? segs[i] !== '' : s === segs[i]));
}

/** Levenshtein distance, bounded: stops counting past `max`. */
function distance(a: string, b: string, max: number): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    let best = i;
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      best = Math.min(best, row[j]!);
    }
    if (best > max) return max + 1;
    prev = row;
  }
  return prev[b.length]!;
}

/** The route pattern as the documentation writes it (`{id}`). */
const shown = (url: string) => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

export class RouteHelp {
  private patterns: Pattern[] | undefined;
  constructor(private readonly registered: readonly RegisteredRoute[]) {}

  private all(): Pattern[] {
    // Read once the routes are all registered (the first unmatched request comes after ready).
    this.patterns ??= this.registered.map((r) => ({ method: r.method, url: r.url, segments: segmentsOf(r.url) }));
    return this.patterns;
  }

  /** The methods a path is served under (HEAD wherever GET is), empty when none. */
  allowed(path: string): string[] {
    const segs = segmentsOf(path);
    const methods = new Set(this.all().filter((p) => takes(p, segs)).map((p) => p.method));
    if (methods.has('GET')) methods.add('HEAD');
    return [...methods].sort();
  }

  /** The nearest route to an unknown path, when a typo away: a few edits in the segments that differ. */
  suggestion(method: string, path: string): string | undefined {
    if (path.length > SUGGEST_PATH_MAX_CHARS) return undefined;
    const segs = segmentsOf(path);
    let best: { d: number; p: Pattern } | undefined;
    for (const p of this.all()) {
      if (p.segments.length !== segs.length || p.segments.includes('*')) continue;
      // Parameters take the request's own segment: only the fixed words are compared.
      let d = 0;
      let budget = 0;
      for (let i = 0; i < segs.length && d <= 3; i++) {
        const want = p.segments[i]!;
        if (isParam(want) || want === segs[i]) continue;
        const allowedEdits = Math.max(1, Math.floor(want.length / 3));
        budget += allowedEdits;
        d += distance(segs[i]!.toLowerCase(), want, allowedEdits);
      }
      if (d > budget || d > 3) continue;
      // Same distance: the request's own method first.
      if (!best || d < best.d || (d === best.d && p.method === method && best.p.method !== method)) best = { d, p };
    }
    return best ? `${best.p.method} ${shown(best.p.url)}` : undefined;
  }
}
