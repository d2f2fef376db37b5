import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Rejection } from '../../eventstore/handler.ts';
import { AppendTooLarge, EventStoreError, OutcomeUnknown, StoreRecovering } from '../../eventstore/port.ts';
import { isShared } from '../../projector/readcache.ts';
import { HTTP_BODY_MAX_BYTES } from '../../limits.ts';
import { jsonText } from './exact-json.ts';
import { RouteHelp, type RegisteredRoute } from './not-found.ts';
import { canonicalToolCallId } from '../../usecases/tool-calls.ts';

// One central error path. Most errors use the spec's envelope
//   {error: {code, message, details?}, request_id}
// and the exceptions the spec lists keep their own shapes (a bare
// {error: "unauthorized"}, {error: "forbidden", message, status}, ...).

/** An error whose response body is given whole (the spec's odd shapes). */
export class RawHttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
    readonly headers: Record<string, string> = {},
  ) {
    super(typeof body === 'object' && body && 'error' in body ? String((body as { error: unknown }).error) : `http ${status}`);
  }
}

/** An error answered in the standard envelope. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

/**
 * The spec's bare 401; `WWW-Authenticate` (RFC 6750 section 3) says which
 * mistake it was without changing the body: `error="invalid_token"` with the
 * description, or the description alone when no credential was sent at all
 * (section 3.1: no error code then). `resourceMetadata` adds where an OAuth
 * client discovers the authorization server (RFC 9728 section 5.1).
 * The description never repeats what was sent (it names the mistake, not the credential).
 */
export const unauthorized = (description: string, o: { noCredential?: boolean; resourceMetadata?: string } = {}) => {
  const params = [
    ...(o.resourceMetadata ? [`resource_metadata="${o.resourceMetadata}"`] : []),
    ...(o.noCredential ? [] : ['error="invalid_token"']),
    // RFC 6750's error_description characters: printable ASCII without `"` and `\`.
    `error_description="${description.replace(/[^\x20\x21\x23-\x5b\x5d-\x7e]/g, '')}"`,
  ];
  return new RawHttpError(401, { error: 'unauthorized' }, { 'www-authenticate': `Bearer ${params.join(', ')}` });
};
export const forbidden = (message: string) => new RawHttpError(403, { error: 'forbidden', message, status: 403 });
export const insufficientRole = (required: string) => new RawHttpError(403, { error: 'insufficient_role', required });
export const projectResolutionFailed = () => new RawHttpError(500, { error: 'project_resolution_failed' });

/** Every rejection code a decider can raise, with its HTTP status. Unlisted codes answer 409. */
export const REJECTION_STATUS: Record<string, number> = {
  not_found: 404,
  org_exists: 409,
  user_exists: 409,
  user_not_in_org: 404,
  cannot_override_owner: 409,
  owner_required: 403,
  last_owner: 409,
  slug_invalid: 400,
  slug_reserved: 400,
  slug_conflict: 400,
  environment_mismatch: 400,
  cannot_delete_default: 409,
  cannot_delete_last_project: 409,
  cannot_delete_with_consumer_records: 409,
  concurrency_conflict: 409,
  transition_conflict: 409,
  invalid_transition: 409,
  idempotency_key_reused: 409,
  agent_not_found: 404,
  agent_exists: 409,
  invalid_did_segment: 400,
  no_active_key: 409,
  key_not_found: 404,
  key_already_revoked: 409,
  agent_already_revoked: 409,
  mandate_not_found: 404,
  mandate_agent_key_invalid: 403,
  mandate_not_active: 409,
  no_active_card: 404,
  consumer_exists: 409,
  mandate_exists: 409,
  regulatory_minimum_violation: 400,
  window_ordering_invalid: 400,
  incident_already_acknowledged: 409,
  consent_exists: 409,
  authorization_already_used: 409,
  fauth_final: 409,
  approval_not_pending: 409,
  invalid_body: 400,
  invalid_query: 400,
  approval_expired: 409,
  no_partner_account: 422,
  not_wired: 501,
  idempotent_lookup_failed: 500,
  partner_account_exists: 409,
  funding_source_not_found: 404,
  contact_verification_expired: 410,
  contact_verification_code_mismatch: 422,
  contact_verification_locked: 409,
  webhook_replayed: 409,
  charge_exists: 409,
  // connections and providers
  keys_mismatch: 400,
  path_secret_keys_mismatch: 400,
  invalid_secret_shape: 400,
  not_api_key_server: 400,
  user_id_required: 400,
  credential_invalid: 400,
  catalog_row_invalid: 500,
  link_token_unknown: 400,
  link_token_used: 409,
  link_expired: 410,
  not_test_environment: 422,
  not_awaiting_verification: 409,
  run_stale: 410,
  vault_unavailable: 503,
  fields_not_user_editable: 400,
  no_user_fields: 400,
  provider_has_no_inbound_webhooks: 400,
  auth_type_mismatch: 400,
  oauth_not_configured: 404,
  oauth_client_not_configured: 500,
  invalid_scope: 400,
  browser_worker_unavailable: 503,
  browser_capacity: 503,
  browser_worker_failed: 502,
  cascade_pending: 503,
  webhook_signature_invalid: 401,
  webhook_timestamp_stale: 400,
  invalid_webhook_body: 400,
  // hosted-browser connect
  session_used: 409,
  session_expired: 410,
  not_logged_in: 409,
  session_exists: 409,
  link_exists: 409,
  metadata_update_failed: 409,
  connection_not_active: 409,
  connection_exists: 409,
  counterparty_not_found: 404,
  negotiation_exists: 409,
  tool_not_found: 404,
  sweep_in_progress: 409,
  // approvals and payments
  settlement_outcome_unknown: 502,
  // the x402 facilitator's execution (src/usecases/x402.ts)
  facilitator_unavailable: 503,
  mainnet_not_enabled: 501,
  missing_required_field: 400,
  invalid_payload: 400,
  malformed_authorization: 400,
  network_mismatch: 400,
  unsupported_asset: 400,
  bad_signature: 401,
  signer_mismatch: 401,
  authorization_not_yet_valid: 422,
  authorization_expired: 422,
  payee_authorization_mismatch: 422,
  x402_mainnet_cap_exceeded: 422,
  settlement_failed: 502,
  // mandates (src/usecases/mandates.ts)
  mandate_purpose_required: 400,
  invalid_purpose_encoding: 400,
  expires_at_in_past: 400,
  sandbox_funding_not_permitted: 403,
  card_not_found: 404,
  // monetized MCP servers (src/usecases/mcp-servers.ts)
  invalid_upstream_url: 400,
  payto_provisioning_failed: 503,
  sweep_failed: 503,
  // outbound webhooks (src/usecases/webhook-endpoints.ts, webhook-deliveries.ts)
  unknown_server: 400,
  invalid_webhook_url: 400,
  invalid_delivery_id: 400,
  webhooks_unavailable: 503,
  trigger_not_found: 404,
  trigger_event_mismatch: 400,
  trigger_not_active: 409,
  // end of approvals & payments
  secret_purge_failed: 503,
  // a spend's declines (commands/mandate.ts SPEND_CODES; mandate_not_found and mandate_not_active above)
  mandate_already_revoked: 409,
  mandate_already_expired: 410,
  currency_not_authorized: 403,
  merchant_not_allowed: 403,
  per_tx_cap_exceeded: 422,
  total_cap_exceeded: 422,
  // issue 58: payee spends, wallet transfers (currency_not_authorized answers 422 there: src/http/consumer-transfers.ts), directed-pay consents, the catalog
  mandate_agent_mismatch: 403,
  same_slot_transfer: 422,
  unsupported_transfer_route: 422,
  transfer_amount_too_small: 422,
  consent_not_found: 404,
  consent_already_used: 409,
  consent_expired: 410,
  tool_ambiguous: 409,
  // sessions and tool calls
  session_closed: 409,
  server_unknown: 404,
  tool_unknown: 404,
  invalid_input: 400,
  not_connected: 424,
  provider_error: 502,
  invalid_held_call: 409,
  model_error: 502,
  // bank consents (src/usecases/bank-consents.ts; not_found and invalid_transition above)
  unknown_bank: 400,
  bank_refused: 502,
  bank_unavailable: 502,
  consent_active_for_consumer: 409,
  bank_consent_held_elsewhere: 409,
  consent_lock_timeout: 503,
  consent_disappeared: 500,
  missing_bank_consent_id: 500,
  consent_not_authorised: 409,
  consent_missing_tokens: 500,
  // pix keys (src/usecases/pix-keys.ts; pix_key_invalid is with the partner accounts below)
  pix_key_document_mismatch: 403,
  pix_key_ownership_unverified: 409,
  pix_key_registration_uncertain: 409,
  pix_key_provider_refused: 422,
  pix_key_provider_unavailable: 502,
  // the audit chain's proofs (src/usecases/audit-proofs.ts)
  not_yet_checkpointed: 409,
  chain_unverifiable: 409,
  // pix charges (src/usecases/pix-charges.ts)
  wallet_not_active: 409,
  pix_key_required: 409,
  charge_reference_ambiguous: 409,
  payment_refused: 422,
  // pix partner accounts and receivements (src/usecases/pix-accounts.ts, pix-receivements.ts)
  partner_account_refused: 422,
  pix_key_invalid: 400,
  invalid_params: 400,
  no_active_funding_source: 409,
  devolution_refused: 422,
  invalid_signature: 401,
  timestamp_out_of_tolerance: 401,
};

/**
 * Rejection codes the spec answers in their own shape, not the envelope: the
 * status and the whole body, from the rejection (use cases throw the code;
 * only this table knows the wire shape).
 */
export const RAW_REJECTIONS: Readonly<Record<string, (r: Rejection) => { status: number; body: unknown; headers?: Record<string, string> }>> = {
  // A policy's denial or hold (Part 7): the bare 403 {reason, ruleType, ruleId} (+ approval_id, expires_at), the details whole.
  policy_denied: (r) => ({ status: 403, body: r.details ?? {} }),
  approval_required: (r) => ({ status: 403, body: r.details ?? {} }),
  // Test-mode mocks (spec 7): the code at the top level.
  mocks_not_permitted: (r) => ({ status: 403, body: { code: r.code, message: r.message } }),
  tool_not_mocked: (r) => ({ status: 422, body: { code: r.code, message: r.message } }),
  // The open-session quota: {error, message, limit, current}.
  quota_exceeded: (r) => ({ status: 403, body: { error: r.code, message: r.message, ...r.details } }),
  // A Pix key registration the PSP answered with an unreadable body: the framework-default shape the spec gives the operation.
  pix_key_provider_malformed: (r) => ({ status: 500, body: { statusCode: 500, error: 'Internal Server Error', message: r.message, code: r.code } }),
  // A verify-connection failure (spec 4.5): the details are the body {ok: false, error, message, request_id, ...}; the status is its code's.
  verify_failed: (r) => ({ status: VERIFY_STATUS[String(r.details?.error)] ?? 502, body: r.details ?? {} }),
  // Failed API key pastes on the consent page (src/usecases/oauth-paste-guard.ts): {error: rate_limited, message, limit, remaining, retry_after_seconds} and Retry-After.
  key_paste_limited: (r) => ({ status: 429, body: { error: 'rate_limited', message: r.message, ...r.details }, headers: { 'retry-after': String(r.details?.retry_after_seconds) } }),
};

/** The failures of verify-connection with their statuses (OpenAPI errors of the verify routes). */
export const VERIFY_ERRORS = [[401, 'credential_rejected'], [404, 'server_unknown'], [409, 'redirect_not_followed'], [424, 'not_connected'], [501, 'verify_unsupported'], [502, 'provider_unreachable'], [503, 'endpoint_missing']] as const;
const VERIFY_STATUS: Readonly<Record<string, number>> = { ...Object.fromEntries(VERIFY_ERRORS.map(([s, c]) => [c, s])), tool_unknown: 404, invalid_input: 400 };

export function envelope(code: string, message: string, requestId: string, details?: Record<string, unknown>) {
  return { error: { code, message, ...(details ? { details } : {}) }, request_id: requestId };
}

export type Issue = { path: (string | number)[]; code: string; message: string };

/** The top message of a 400: what was invalid and its first issue, so the message alone says what to fix ("the body is invalid: amount_minor: ..."). */
export function invalidMessage(what: string, issues: readonly { path: readonly (string | number)[]; message: string }[]): string {
  const first = issues[0];
  if (!first) return `the ${what} is invalid`;
  const where = first.path.length === 0 ? '' : `${first.path.join('.')}: `;
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more issue${issues.length > 2 ? 's' : ''} in details.issues)` : '';
  return `the ${what} is invalid: ${where}${first.message}${more}`;
}

export function toIssues(issues: readonly { path: readonly PropertyKey[]; code?: string; message: string }[]): Issue[] {
  return issues.map((i) => ({ path: i.path.map((p) => (typeof p === 'number' ? p : String(p))), code: i.code ?? 'invalid', message: i.message }));
}

export type ErrorResponse = { status: number; body: unknown; headers: Record<string, string> };

/** The response for any thrown value; never a stack trace. */
export function errorResponse(err: unknown, requestId: string, bodyLimit: number = HTTP_BODY_MAX_BYTES): ErrorResponse {
  const env = (status: number, code: string, message: string, details?: Record<string, unknown>): ErrorResponse => ({
    status,
    body: envelope(code, message, requestId, details),
    headers: {},
  });
  if (err instanceof RawHttpError) return { status: err.status, body: err.body, headers: err.headers };
  if (err instanceof ApiError) return env(err.status, err.code, err.message, err.details);
  if (err instanceof Rejection && Object.hasOwn(RAW_REJECTIONS, err.code)) return { headers: {}, ...RAW_REJECTIONS[err.code]!(err) };
  if (err instanceof Rejection) {
    const r = env(REJECTION_STATUS[err.code] ?? 409, err.code, err.message, err.details);
    // A rejection that knows when to come back says so in Retry-After too.
    const after = err.details?.retry_after_seconds;
    if (typeof after === 'number' && Number.isInteger(after) && after > 0) r.headers['retry-after'] = String(after);
    return r;
  }
  if (err instanceof OutcomeUnknown) {
    return env(503, 'write_outcome_unknown', 'the store could not confirm whether this request was recorded: read the resource before repeating it; the same Idempotency-Key answers this again', { retry_safe: false });
  }
  // The database lost commits this instance had acknowledged and the instance is
  // reloading its state (src/recovery.ts): nothing of this request was written.
  if (err instanceof StoreRecovering) {
    return { ...env(503, 'store_recovering', `${err.reason}; nothing of this request was written: retry shortly`, { retriable: true }), headers: { 'retry-after': '1' } };
  }
  // The event store or the database could not be reached (a restart, a
  // failover): refused before anything of the request was recorded (an
  // append whose outcome is unknown is OutcomeUnknown, above).
  if ((err instanceof EventStoreError && err.code === 'store_unavailable') || isConnectionFailure(err)) {
    return { ...env(503, 'store_unavailable', 'the database could not be reached; retry shortly with the same Idempotency-Key', { retriable: true }), headers: { 'retry-after': '1' } };
  }
  // The request would record more than the event store takes in one append
  // (refused before anything was written): its content is too large.
  if (err instanceof AppendTooLarge) {
    return env(413, 'payload_too_large', `the request would record more than the event store accepts in one append (${err.limit} bytes)`, { max_append_bytes: err.limit });
  }
  const fe = err as FastifyError;
  switch (fe?.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return env(415, 'unsupported_media_type', 'send the body as application/json');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return env(413, 'payload_too_large', `the request body is larger than ${bodyLimit} bytes, the most this operation accepts: send less`, { max_body_bytes: bodyLimit });
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return env(400, 'invalid_json', 'the request body is not valid JSON');
  }
  if (typeof fe?.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) return env(fe.statusCode, 'bad_request', 'the request could not be read');
  return env(500, 'internal_error', 'the request could not be completed; it is safe to retry with the same Idempotency-Key');
}

/**
 * A failure of the connection to PostgreSQL rather than an answer to a
 * statement: the server shutting down or restarting (SQLSTATE class 57P0x:
 * admin shutdown, crash shutdown, cannot connect now), a connection exception
 * (class 08), or the socket itself.
 */
function isConnectionFailure(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | undefined;
  const code = typeof e?.code === 'string' ? e.code : '';
  if (/^57P0[123]$/.test(code) || code.startsWith('08') || code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === 'EPIPE') return true;
  const msg = typeof e?.message === 'string' ? e.message : '';
  return /^Connection terminated|^Client has encountered a connection error|^terminating connection/.test(msg);
}

/** JSON of shared read-cache values (deeply frozen: src/projector/readcache.ts), encoded once. */
const encodedBodies = new WeakMap<object, string>();

/** An array or a plain object: what JSON.stringify would write for fastify. */
function isJsonContainer(v: unknown): v is object {
  if (typeof v !== 'object' || v === null) return false;
  if (Array.isArray(v)) return true;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

export function sendResponse(reply: FastifyReply, r: { status: number; body?: unknown; headers?: Record<string, string> }): FastifyReply {
  reply.code(r.status);
  if (r.headers) reply.headers(r.headers);
  if (r.body === undefined) return reply.send();
  if (!r.headers?.['content-type']) {
    reply.type('application/json; charset=utf-8');
    const body = r.body;
    if (isShared(body)) {
      let json = encodedBodies.get(body);
      if (json === undefined) encodedBodies.set(body, (json = jsonText(body)));
      return reply.send(json);
    }
    // What fastify would do (JSON.stringify: no response schemas, no serialization hooks), and a bigint as a bare integer.
    if (isJsonContainer(body)) return reply.send(jsonText(body));
  }
  return reply.send(r.body);
}

/**
 * The OAuth endpoints that clients call with a body answer errors in the
 * OAuth shape (RFC 6749 section 5.2, RFC 7591 section 3.2.2), a body that
 * cannot be read (not JSON or a form, malformed, too large) included.
 */
const OAUTH_BODY_ERRORS: Readonly<Record<string, string>> = { '/oauth/token': 'invalid_request', '/oauth/register': 'invalid_client_metadata' };

function oauthShaped(r: ErrorResponse, path: string): ErrorResponse {
  const code = OAUTH_BODY_ERRORS[path];
  const e = (r.body as { error?: { message?: unknown } } | undefined)?.error;
  if (!code || r.status >= 500 || typeof e !== 'object' || e === null) return r;
  return { status: r.status, body: { error: code, error_description: String(e.message ?? 'the request body could not be read') }, headers: { ...r.headers, 'cache-control': 'no-store' } };
}

export function replyError(err: unknown, req: FastifyRequest, reply: FastifyReply): void {
  const r = oauthShaped(errorResponse(err, String(req.id), req.routeOptions?.bodyLimit), req.url.split('?')[0]!);
  if (r.status >= 500) req.log.error({ err }, 'unhandled error');
  void sendResponse(reply, r);
}

/** The central error handler, and the answer to a request no route takes: 405 with Allow, or 404 with the nearest route (src/http/kernel/not-found.ts). */
export function registerErrorHandling(app: FastifyInstance, registered: readonly RegisteredRoute[]): void {
  app.setErrorHandler((err, req, reply) => replyError(err, req, reply));
  const help = new RouteHelp(registered);
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0]!;
    const allow = help.allowed(path);
    if (allow.length > 0) {
      const body = envelope('method_not_allowed', `${req.method} is not served on ${path}: use ${allow.filter((m) => m !== 'HEAD').join(', ')}`, String(req.id), { allow });
      void sendResponse(reply, { status: 405, body, headers: { allow: allow.join(', ') } });
      return;
    }
    const near = help.suggestion(req.method, path);
    const message = `no route for ${req.method} ${path}${near ? `: did you mean ${near}?` : ''}`;
    void sendResponse(reply, { status: 404, body: envelope('not_found', message, String(req.id), near ? { did_you_mean: near } : undefined) });
  });
}

// A tool call's `{id}` is
// `tc_<digits>` or bare digits; a malformed id answers 400 and an id not
// visible to the caller 404, each with a bare body (no error.code, no
// request_id: spec Part 7). Used by the tool-call routes, their status streams
// and the composition root's early answer to an over-long id.

export const malformedId = () => new RawHttpError(400, { error: 'invalid_tool_call_id', message: 'the id must be tc_<digits> or digits' });
export const notVisible = () => new RawHttpError(404, { error: 'not_found', message: 'tool call not found' });

/** The canonical id of a path's `{id}`, or the bare 400. */
export function toolCallIdParam(raw: string): string {
  const id = canonicalToolCallId(raw);
  if (!id) throw malformedId();
  return id;
}
