import { z } from 'zod';
import { IntString, IsoTime } from './common.ts';

// Facts of commerce memory (spec 4.8): counterparties (stream
// `counterparty-<id>`), the claim of an identifier within a project (stream
// `counterparty_identifier-<project>.<identifier_kind>.<hash>`), interactions
// (stream `interaction-<id>`), the claim of a (source, source_ref) pair within a
// project (stream `interaction_source_ref-<project>.<source>.<hash>`), and
// negotiations (stream `negotiation-<id>`). Amounts are integer minor units as
// decimal strings.

export const CounterpartyKind = z.enum(['supplier', 'customer', 'agent_peer']);
export const IdentifierKind = z.enum(['cnpj', 'cpf', 'email', 'phone', 'wallet_address', 'other']);
export const InteractionKind = z.enum(['quote', 'negotiation', 'order', 'invoice', 'payment', 'shipment', 'message', 'other']);
export const InteractionSource = z.enum(['agent_execute', 'webhook', 'manual', 'backfill']);
/** How a negotiation ended. `agreed` is the spec's own example (Part 2, negotiation-stats); `accepted`, this service's first word for it, stays valid; stats count each under the word it was recorded with. */
export const NegotiationOutcome = z.enum(['agreed', 'accepted', 'rejected', 'abandoned']);
const JsonObject = z.record(z.string(), z.unknown());

export const CounterpartyCreated = z.object({
  counterparty_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  kind: CounterpartyKind,
  name: z.string(),
  identifier: z.string().nullable(),
  identifier_kind: IdentifierKind.nullable(),
  metadata: JsonObject,
  created_at: IsoTime,
});

/** A re-registration of the same identifier: the name it brought and the metadata after the shallow merge. */
export const CounterpartyMerged = z.object({
  counterparty_id: z.string(),
  name: z.string(),
  metadata: JsonObject,
  at: IsoTime,
});

export const CounterpartyPreferencesSet = z.object({
  counterparty_id: z.string(),
  preferences: JsonObject,
  at: IsoTime,
});

/** The existence of this event in its stream is the reservation of the identifier. */
export const CounterpartyIdentifierClaimed = z.object({
  counterparty_id: z.string(),
  project_id: z.string(),
  identifier_kind: IdentifierKind,
  identifier_hash: z.string(),
  at: IsoTime,
});

export const InteractionRecorded = z.object({
  interaction_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  counterparty_id: z.string(),
  /** The counterparty's kind when recorded (fixed for its life): the insight buckets filter on it. */
  counterparty_kind: CounterpartyKind,
  kind: InteractionKind,
  occurred_at: IsoTime,
  source: InteractionSource,
  source_ref: z.string().nullable(),
  agent_id: z.string().nullable(),
  amount_minor: IntString.nullable(),
  currency: z.string().nullable(),
  metadata: JsonObject,
  recorded_at: IsoTime,
});

/** The existence of this event in its stream reserves the (source, source_ref) pair. */
export const InteractionSourceRefClaimed = z.object({
  interaction_id: z.string(),
  project_id: z.string(),
  source: InteractionSource,
  source_ref_hash: z.string(),
  at: IsoTime,
});

export const NegotiationRecorded = z.object({
  negotiation_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  counterparty_id: z.string(),
  item_ref: z.string(),
  outcome: NegotiationOutcome,
  currency: z.string().nullable(),
  list_price_minor: IntString.nullable(),
  final_price_minor: IntString.nullable(),
  started_at: IsoTime,
  ended_at: IsoTime.nullable(),
  metadata: JsonObject,
  created_at: IsoTime,
});

export const commerceMemoryEvents = {
  'counterparty.created': CounterpartyCreated,
  'counterparty.merged': CounterpartyMerged,
  'counterparty.preferences_set': CounterpartyPreferencesSet,
  'counterparty_identifier.claimed': CounterpartyIdentifierClaimed,
  'interaction.recorded': InteractionRecorded,
  'interaction_source_ref.claimed': InteractionSourceRefClaimed,
  'negotiation.recorded': NegotiationRecorded,
} as const;
