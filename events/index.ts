import type { z } from 'zod';
import { inShape } from './check.ts';
import { agentEvents } from './agent.ts';
import { auditEvents, SEALER_OUTPUT_TYPES } from './audit.ts';
import { consumerEvents } from './consumer.ts';
import { mandateEvents } from './mandate.ts';
import { directedConsentEvents } from './directed-consent.ts';
import { webhookEvents } from './webhook.ts';
import { bankConsentEvents } from './bank-consent.ts';
import { x402Events } from './x402.ts';
import { orgEvents } from './org.ts';
import { policyEvents } from './policy.ts';
import { oauthEvents } from './oauth.ts';
import { pixEvents } from './pix.ts';
import { connectionEvents } from './connection.ts';
import { commerceMemoryEvents } from './commerce-memory.ts';
import { mcpEvents } from './mcp.ts';
import { sessionEvents } from './session.ts';
import { connectLinkEvents } from './connect-link.ts';
import { signupRunEvents } from './signup-run.ts';
import { hostedConnectEvents } from './hosted-connect.ts';
import { personEvents } from './person.ts';

// The registry of every event type: one vocabulary for the log, the audit
// chain's event_type and webhook subscriptions.

export const eventSchemas = {
  ...orgEvents,
  ...agentEvents,
  ...consumerEvents,
  ...mandateEvents,
  ...directedConsentEvents,
  ...auditEvents,
  ...webhookEvents,
  ...bankConsentEvents,
  ...x402Events,
  ...policyEvents,
  ...oauthEvents,
  ...pixEvents,
  ...connectionEvents,
  ...commerceMemoryEvents,
  ...mcpEvents,
  ...sessionEvents,
  ...connectLinkEvents,
  ...signupRunEvents,
  ...hostedConnectEvents,
  ...personEvents,
} as const;

export type EventType = keyof typeof eventSchemas;
export type EventDataOf<T extends EventType> = z.infer<(typeof eventSchemas)[T]>;
/** A domain event as deciders see it: a type and its data. */
export type DomainEvent = { [T in EventType]: { type: T; data: EventDataOf<T> } }[EventType];

export const eventTypes = Object.keys(eventSchemas) as EventType[];

/** The facts of the domain: every type but the sealer's own output. The webhook subscription vocabulary. */
export const businessEventTypes = eventTypes.filter((t) => !SEALER_OUTPUT_TYPES.has(t));

export function isEventType(t: string): t is EventType {
  return Object.hasOwn(eventSchemas, t);
}

/**
 * Validates event data against its schema; throws on an unknown type or a bad
 * shape. Data exactly in its schema's shape (what the write side appends) is
 * answered as it is, without a copy (events/check.ts): the reader must not
 * change it. Anything else is zod's copy, without the members the schema does
 * not name.
 */
export function parseEvent(type: string, data: unknown): DomainEvent {
  if (!isEventType(type)) throw new Error(`unknown event type ${type}`);
  const schema = eventSchemas[type];
  if (inShape(type, schema, data)) return { type, data } as DomainEvent;
  return { type, data: schema.parse(data) } as DomainEvent;
}

/** The data as the write side appends it: always zod's copy (members in the schema's order, none it does not name). */
export function normalizeEvent(type: string, data: unknown): DomainEvent {
  if (!isEventType(type)) throw new Error(`unknown event type ${type}`);
  return { type, data: eventSchemas[type].parse(data) } as DomainEvent;
}
