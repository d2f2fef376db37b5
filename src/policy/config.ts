import { z } from 'zod';

// The `config` object of each policy type (spec 4.11 leaves the shapes open;
// these are ours, published in the OpenAPI document and checked on write).
// Amounts are integer minor units; windows are whole seconds.

const Minor = z.union([z.string().regex(/^[1-9]\d{0,15}$/), z.number().int().positive().max(Number.MAX_SAFE_INTEGER).transform(String)]);
const WindowSeconds = z.number().int().min(1).max(366 * 86_400);
/** Whom a counter counts: each agent apart, each tool apart, or the organization as one. */
const Per = z.enum(['agent', 'tool', 'organization']).default('agent').describe('Whom the counter counts: each agent apart (`agent`, the default), each tool apart (`tool`), or the whole organization as one.');
const HHMM = z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'HH:MM, 24-hour');
export const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;

function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

export const AllowConfig = z.object({ note: z.string().max(500).optional() }).strict();
export const DenyConfig = AllowConfig;
export const BudgetConfig = z
  .object({ amount_minor: Minor, currency: z.string().min(3).max(10), window_seconds: WindowSeconds, per: Per })
  .strict();
export const RateLimitConfig = z.object({ max_calls: z.number().int().min(1).max(1_000_000).describe('The most calls allowed in one window; the next is denied `rate_limited`.'), window_seconds: WindowSeconds, per: Per }).strict();
export const TimeWindowConfig = z
  .object({
    timezone: z.string().min(1).max(64).refine(isTimeZone, 'an IANA time zone').describe('The IANA time zone the hours are read in, e.g. `America/Sao_Paulo`.'),
    days: z.array(z.enum(WEEKDAYS)).min(1).max(7).describe('The weekdays calls are allowed on (`mon` … `sun`), in the local time zone.'),
    /** Local wall-clock start (inclusive) and end (exclusive); end before start spans midnight. */
    start: HHMM,
    end: HHMM,
  })
  .strict()
  .refine((c) => c.start !== c.end, { message: 'start and end must differ', path: ['end'] });
export const ApprovalRequiredConfig = z
  .object({
    approval_ttl_seconds: z.number().int().min(60).max(7 * 86_400).default(3_600).describe('How long a person has to decide, in seconds (60 to 604 800; default 3 600); then the approval expires.'),
    /** Only calls of at least this amount need a person (calls without an amount always do). */
    min_amount_minor: Minor.optional(),
  })
  .strict();

export const CONFIG_SCHEMAS = {
  allow: AllowConfig,
  deny: DenyConfig,
  budget: BudgetConfig,
  'rate-limit': RateLimitConfig,
  'time-window': TimeWindowConfig,
  'approval-required': ApprovalRequiredConfig,
} as const;

export type PolicyConfigOf = {
  allow: z.infer<typeof AllowConfig>;
  deny: z.infer<typeof DenyConfig>;
  budget: z.infer<typeof BudgetConfig>;
  'rate-limit': z.infer<typeof RateLimitConfig>;
  'time-window': z.infer<typeof TimeWindowConfig>;
  'approval-required': z.infer<typeof ApprovalRequiredConfig>;
};

/** Agent and tool patterns: an exact name, or a prefix ending in `*`. An empty list matches everything. */
export const Pattern = z.string().min(1).max(200).regex(/^[^*]*\*?$/, 'a name, or a prefix ending in *');

export function matches(patterns: readonly string[], value: string): boolean {
  if (patterns.length === 0) return true;
  return patterns.some((p) => (p.endsWith('*') ? value.startsWith(p.slice(0, -1)) : p === value));
}
