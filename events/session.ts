import { z } from 'zod';
import { IsoTime } from './common.ts';

// Facts of sessions (stream `session-<ses_id>`), of the per-organization
// session quota (stream `session_quota-<org>`), and of tool calls (stream
// `tool_call-<digits>`). A tool call's input and output are the agent's and the
// provider's JSON, verbatim; credentials never pass through them.

const Json = z.unknown();

export const SessionCreated = z.object({
  session_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  user_id: z.string(),
  servers: z.array(z.string()),
  environment: z.enum(['live', 'test']),
  /** Test mode: `<server>/<tool>` → the output a call of that tool returns without reaching the provider (test credentials only). */
  mocks: z.record(z.string(), Json).optional(),
  created_at: IsoTime,
});
export const SessionClosed = z.object({ session_id: z.string(), at: IsoTime });
/** The session and its tool-call history leave the read side (its project was deleted); the events stay. */
export const SessionDeleted = z.object({ session_id: z.string(), reason: z.enum(['project_deleted']), at: IsoTime });

export const SessionQuotaClaimed = z.object({ session_id: z.string(), limit: z.number().int(), at: IsoTime });
export const SessionQuotaReleased = z.object({ session_id: z.string(), at: IsoTime });

export const ToolCallStarted = z.object({
  tool_call_id: z.string(),
  session_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  user_id: z.string(),
  server_id: z.string(),
  tool_name: z.string(),
  input: Json,
  routing: Json,
  called_at: IsoTime,
});
export const ToolCallSucceeded = z.object({
  tool_call_id: z.string(),
  session_id: z.string(),
  server_id: z.string(),
  tool_name: z.string(),
  output: Json,
  duration_ms: z.number().int().nonnegative(),
  connection_id: z.string().nullable(),
  /** The provider's key for a charge or an identity check the call started; later webhooks carrying it move the view. */
  idempotency_key: z.string().nullable(),
  /** Which status view the call opened: payment (a charge), verification (an identity check), or none. */
  view: z.enum(['payment', 'verification']).nullable(),
  /** The initial status of that view. */
  view_status: z.string().nullable(),
  hosted_url: z.string().nullable(),
  failover_trail: z.array(Json),
  at: IsoTime,
});
export const ToolCallFailed = z.object({
  tool_call_id: z.string(),
  session_id: z.string(),
  server_id: z.string(),
  tool_name: z.string(),
  error_code: z.string(),
  error_message: z.string(),
  retriable: z.boolean(),
  duration_ms: z.number().int().nonnegative(),
  failover_trail: z.array(Json),
  at: IsoTime,
});

/**
 * A proxy call (stream `proxy_call-<id>`): a request to a connected provider's
 * own API through the session (POST /v1/sessions/{id}/proxy_execute). The
 * record holds the caller's path, query, body and header names; never the
 * credential, the full URL (path secrets live there) or header values.
 */
export const ProxyCallStarted = z.object({
  proxy_call_id: z.string(),
  session_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  user_id: z.string(),
  server_id: z.string(),
  method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']),
  endpoint: z.string(),
  params: z.record(z.string(), z.string()),
  body: Json,
  header_names: z.array(z.string()),
  called_at: IsoTime,
});
/** The provider answered (any HTTP status: the caller reads it). */
export const ProxyCallCompleted = z.object({
  proxy_call_id: z.string(),
  session_id: z.string(),
  server_id: z.string(),
  status: z.number().int(),
  data: Json,
  duration_ms: z.number().int().nonnegative(),
  connection_id: z.string().nullable(),
  at: IsoTime,
});
/** The provider was not reached, or its answer could not be read. */
export const ProxyCallFailed = z.object({
  proxy_call_id: z.string(),
  session_id: z.string(),
  server_id: z.string(),
  error_code: z.string(),
  error_message: z.string(),
  duration_ms: z.number().int().nonnegative(),
  at: IsoTime,
});

export const sessionEvents = {
  'session.created': SessionCreated,
  'session.closed': SessionClosed,
  'session.deleted': SessionDeleted,
  'session_quota.claimed': SessionQuotaClaimed,
  'session_quota.released': SessionQuotaReleased,
  'tool_call.started': ToolCallStarted,
  'tool_call.succeeded': ToolCallSucceeded,
  'tool_call.failed': ToolCallFailed,
  'proxy_call.started': ProxyCallStarted,
  'proxy_call.completed': ProxyCallCompleted,
  'proxy_call.failed': ProxyCallFailed,
} as const;
