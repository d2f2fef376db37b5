import type { Acknowledgement, Thresholds } from '../../commands/audit.ts';
import type { FieldError } from './components.tsx';
import { formField } from './context.ts';

// The audit page's forms as a person fills them: an incident's
// acknowledgement, the verification thresholds, and the event explorer's
// filter. Each answers its value, or the errors to show beside the fields
// (the same rules as the HTTP API's bodies: spec 4.12 and 8 Limits).

export type Parsed<T> = { ok: true; value: T } | { ok: false; errors: FieldError[] };

// Control characters stripped (spec: "after control stripping"), a lone surrogate made U+FFFD.
// eslint-disable-next-line no-control-regex
const stripControls = (s: string) => s.replace(/[\u0000-\u001f\u007f]/g, '').replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');

export function parseAckForm(body: unknown): Parsed<Acknowledgement> {
  const errors: FieldError[] = [];
  const personal = formField(body, 'personal_data_affected');
  if (personal !== 'yes' && personal !== 'no') errors.push({ field: 'personal-yes', message: 'Say whether personal data was affected.' });
  const summary = stripControls(formField(body, 'resolution_summary'));
  if (summary.trim() === '') errors.push({ field: 'resolution_summary', message: 'Write what was found and what was done.' });
  else if (summary.length > 8000) errors.push({ field: 'resolution_summary', message: 'The summary must be at most 8000 characters.' });
  const anpd = formField(body, 'anpd_notification_status');
  if (anpd !== 'not_required' && anpd !== 'notified') errors.push({ field: 'anpd-not_required', message: 'Say whether the ANPD was notified, or why not.' });
  const reference = stripControls(formField(body, 'incident_reference')).trim();
  if (reference.length > 256) errors.push({ field: 'incident_reference', message: 'The reference must be at most 256 characters.' });
  if (errors.length > 0) return { ok: false, errors };
  return {
    ok: true,
    value: {
      personal_data_affected: personal === 'yes',
      resolution_summary: summary,
      anpd_notification_status: anpd as 'not_required' | 'notified',
      incident_reference: reference === '' ? null : reference,
      affected_from_sequence: null,
      affected_to_sequence: null,
    },
  };
}

export const THRESHOLD_FIELDS: readonly { key: keyof Thresholds; label: string; unit: string; max: number }[] = [
  { key: 'verification_window_days', label: 'Verification window', unit: 'days', max: 36_500 },
  { key: 'hot_window_days', label: 'Hot window', unit: 'days', max: 36_500 },
  { key: 'hot_max_staleness_seconds', label: 'Hot entries re-verified at least every', unit: 'seconds', max: 2_147_483_647 },
  { key: 'warm_window_days', label: 'Warm window', unit: 'days', max: 36_500 },
  { key: 'warm_max_staleness_seconds', label: 'Warm entries re-verified at least every', unit: 'seconds', max: 2_147_483_647 },
  { key: 'cold_max_staleness_seconds', label: 'Cold entries re-verified at least every', unit: 'seconds', max: 2_147_483_647 },
];

/** The thresholds form: every field a whole number in range; the decider checks the regulatory minimum and the windows' order. */
export function parseConfigForm(body: unknown): Parsed<Partial<Thresholds>> {
  const errors: FieldError[] = [];
  const patch: Partial<Thresholds> = {};
  for (const f of THRESHOLD_FIELDS) {
    const raw = formField(body, f.key).trim();
    if (raw === '') continue;
    const n = /^\d{1,10}$/.test(raw) ? Number(raw) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < 1 || n > f.max) errors.push({ field: f.key, message: `${f.label} must be a whole number of ${f.unit} from 1 to ${f.max}.` });
    else patch[f.key] = n;
  }
  return errors.length > 0 ? { ok: false, errors } : { ok: true, value: patch };
}

export type ExplorerFilter = { type: string; from: string; to: string; before: string };

const DATE = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?)?$/;
const DAY_MS = 86_400_000;

/** The explorer's query: type exact or a prefix ending in a dot; from and to as UTC dates or date-times (default the last 7 days); before a sequence number (the cursor). */
export function parseExplorer(query: unknown, now: Date): Parsed<{ filter: ExplorerFilter; from: number; to: number; before?: string; eventType?: string }> {
  const q = (typeof query === 'object' && query !== null ? query : {}) as Record<string, unknown>;
  const text = (k: string) => (typeof q[k] === 'string' ? (q[k] as string).trim() : '');
  const filter: ExplorerFilter = { type: text('type'), from: text('from'), to: text('to'), before: text('before') };
  const errors: FieldError[] = [];
  const time = (raw: string, field: string, dflt: number, endOfDay: boolean) => {
    if (raw === '') return dflt;
    const t = DATE.test(raw) ? Date.parse(raw.length === 10 ? `${raw}T${endOfDay ? '23:59:59.999' : '00:00:00'}Z` : `${raw}Z`) : Number.NaN;
    if (!Number.isFinite(t)) errors.push({ field: `explore-${field}`, message: `${field === 'from' ? 'From' : 'To'} must be a date (2026-11-29) or a date and time in UTC (2026-11-29T14:30).` });
    return t;
  };
  const to = time(filter.to, 'to', now.getTime(), true);
  const from = time(filter.from, 'from', to - 7 * DAY_MS, false);
  if (errors.length === 0 && from > to) errors.push({ field: 'explore-from', message: 'From must be before To.' });
  if (filter.type.length > 200 || /\s/.test(filter.type)) errors.push({ field: 'explore-type', message: 'The event type is one word, like approval.approved, or a prefix ending in a dot, like approval.' });
  if (filter.before !== '' && !/^\d{1,18}$/.test(filter.before)) errors.push({ field: 'explore-type', message: 'The page cursor is not a sequence number; start again from the first page.' });
  if (errors.length > 0) return { ok: false, errors };
  return { ok: true, value: { filter, from, to, ...(filter.before ? { before: filter.before } : {}), ...(filter.type ? { eventType: filter.type } : {}) } };
}
