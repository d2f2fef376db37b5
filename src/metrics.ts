import { Counter, Registry } from 'prom-client';

// Process-wide counters of what the layers below HTTP do (appends, webhook
// deliveries, settlements, verification passes), for GET /metrics. Labels are
// closed vocabularies (event types, outcomes): never an organization, project,
// id or URL. The HTTP layer merges this registry with its own per-app one.

export const processRegistry = new Registry();

export const eventsAppended = new Counter({
  name: 'ledger_events_appended_total',
  help: 'Events appended by command handling, by event type',
  labelNames: ['type'] as const,
  registers: [processRegistry],
});

export const webhookDeliveries = new Counter({
  name: 'ledger_webhook_delivery_attempts_total',
  help: 'Webhook delivery attempts, by outcome (delivered, failed: retried later, dead: dead-lettered)',
  labelNames: ['outcome'] as const,
  registers: [processRegistry],
});

export const x402Settlements = new Counter({
  name: 'ledger_x402_settlements_total',
  help: 'x402 settlements sent to a chain, by outcome (settled, reverted, not_sent, unknown)',
  labelNames: ['outcome'] as const,
  registers: [processRegistry],
});

export const auditVerificationPasses = new Counter({
  name: 'ledger_audit_verification_passes_total',
  help: 'Audit chain verification passes over one organization, by result (ok, broken)',
  labelNames: ['result'] as const,
  registers: [processRegistry],
});

/** Counts one audit verification pass (the verifier's, in this thread or reported by its own thread). */
export const countPass = (result: 'ok' | 'broken'): void => void auditVerificationPasses.inc({ result });
