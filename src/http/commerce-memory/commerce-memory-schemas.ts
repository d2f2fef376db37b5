import { z } from 'zod';
import { CounterpartyKind, IdentifierKind, InteractionKind, InteractionSource } from '../../../events/commerce-memory.ts';
import { Instant, Timestamp } from '../kernel/schemas.ts';

// The wire shapes of commerce memory (spec 4.8), shared by its two route
// modules (commerce-memory.ts and commerce-memory-insights.ts).

export { Instant };

/** The commerce-memory enums, described once for the reference. */
export const CounterpartyKindField = CounterpartyKind.describe('What the counterparty is to the organization: `supplier`, `customer` or `agent_peer` (another agent).');
export const InteractionKindField = InteractionKind.describe('What happened: `quote`, `negotiation`, `order`, `invoice`, `payment`, `shipment`, `message` or `other`.');
export const InteractionSourceField = InteractionSource.describe('Where the record came from: `agent_execute` (a tool call of an agent), `webhook`, `manual` (default) or `backfill`.');

export const Metadata = z.record(z.string(), z.unknown()).refine((m) => JSON.stringify(m).length <= 32_768 && Object.keys(m).length <= 64, 'at most 64 keys and 32 KB');
export const Currency = z.string().regex(/^[A-Z][A-Z0-9]{2,9}$/, 'an upper-case currency code (ISO 4217 or a token symbol)');
/** Amounts in minor units on the wire: JSON integers up to 10^15 (exact as JS numbers); their sums are bigint, written exactly (src/http/kernel/exact-json.ts). */
export const AmountMinor = z.int().min(0).max(1_000_000_000_000_000);
export const Limit = (def: number, max: number) => z.coerce.number().int().min(1).max(max).default(def);

export const CounterpartyView = z
  .object({
    id: z.string(),
    kind: CounterpartyKindField,
    name: z.string(),
    identifier: z.string().nullable(),
    identifier_kind: IdentifierKind.nullable(),
    metadata: z.record(z.string(), z.unknown()),
    created_at: Timestamp,
    last_seen_at: Timestamp,
  })
  .meta({ id: 'Counterparty' });

export const InteractionView = z
  .object({
    id: z.string(),
    counterparty_id: z.string(),
    kind: InteractionKindField,
    occurred_at: Timestamp,
    source: InteractionSourceField,
    source_ref: z.string().nullable(),
    agent_id: z.string().nullable(),
    amount_minor: z.int().nullable(),
    currency: z.string().nullable(),
    metadata: z.record(z.string(), z.unknown()),
  })
  .meta({ id: 'Interaction' });

export const Preferences = z
  .object({ counterparty_id: z.string(), preferences: z.record(z.string(), z.unknown()), updated_at: Timestamp.nullable() })
  .meta({ id: 'CounterpartyPreferences' });

export const bothOrNeither = (a: string, b: string) => (v: Record<string, unknown>, ctx: z.RefinementCtx) => {
  const hasA = v[a] !== undefined && v[a] !== null;
  const hasB = v[b] !== undefined && v[b] !== null;
  if (hasA !== hasB) ctx.addIssue({ code: 'custom', path: [hasA ? b : a], message: `${a} and ${b} are given together or not at all` });
};

/** since (inclusive) must come before until (exclusive) when both are given. */
export const orderedWindow = (v: { since?: Date | undefined; until?: Date | undefined }, ctx: z.RefinementCtx) => {
  if (v.since && v.until && v.since >= v.until) ctx.addIssue({ code: 'custom', path: ['since'], message: 'since must be before until' });
};

