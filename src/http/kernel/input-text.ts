import { hasLoneSurrogate } from '../../audit/hash.ts';
import { ApiError, invalidMessage } from './errors.ts';

// What a request may carry into the ledger: text every reader of the log can
// hold, nested no deeper than an event takes. PostgreSQL's text and jsonb
// refuse U+0000, and a lone surrogate has no canonical JSON form (no audit
// entry could seal it); the event store refuses both as well (checkAppend), so
// this check is what turns them into the spec's 400 before anything runs.

/** Deeper than this a request's JSON is refused (an event's data takes 64 levels; routes nest bodies a few levels down). */
export const INPUT_MAX_DEPTH = 32;

const SUSPECT = /[\u0000\uD800-\uDFFF]/;

function badString(s: string): string | undefined {
  if (!SUSPECT.test(s)) return undefined;
  if (s.includes('\u0000')) return 'must not contain the character U+0000';
  return hasLoneSurrogate(s) ? 'must not contain a lone surrogate (text must be well-formed Unicode)' : undefined;
}

type Found = { path: (string | number)[]; message: string };

function find(v: unknown, path: (string | number)[]): Found | undefined {
  if (typeof v === 'string') {
    const m = badString(v);
    return m ? { path, message: m } : undefined;
  }
  if (typeof v !== 'object' || v === null) return undefined;
  if (path.length >= INPUT_MAX_DEPTH) return { path, message: `nested deeper than ${INPUT_MAX_DEPTH} levels` };
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const f = find(v[i], [...path, i]);
      if (f) return f;
    }
    return undefined;
  }
  for (const k of Object.keys(v)) {
    const km = badString(k);
    if (km) return { path: [...path, k], message: `member name ${km}` };
    const f = find((v as Record<string, unknown>)[k], [...path, k]);
    if (f) return f;
  }
  return undefined;
}

/**
 * How a route treats the text of some top-level body members: a code of its
 * own for text the ledger cannot hold (a mandate's purpose:
 * invalid_purpose_encoding), or null where the route makes the member's text
 * holdable itself (control characters stripped, say), so the check passes it by.
 */
export type BodyText = Readonly<Record<string, string | null>>;

/** Refuses (400 `code`) a request part the ledger could not hold, naming where. */
export function checkInputText(value: unknown, code: string, what: string, rules?: BodyText): void {
  let f: Found | undefined;
  if (rules && typeof value === 'object' && value !== null && !Array.isArray(value)) {
    for (const k of Object.keys(value)) {
      if (rules[k] === null) continue;
      f = find({ [k]: (value as Record<string, unknown>)[k] }, []);
      if (f) break;
    }
  } else {
    f = find(value, []);
  }
  if (!f) return;
  const own = typeof f.path[0] === 'string' ? rules?.[f.path[0]] : undefined;
  const issues = [{ path: f.path, code: 'custom', message: f.message }];
  throw new ApiError(400, own ?? code, invalidMessage(what, issues), { issues });
}
