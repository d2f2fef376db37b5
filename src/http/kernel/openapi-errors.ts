import type { RouteSpec } from './route.ts';
import { VERIFY_ERRORS } from './errors.ts';

// The error answers of each operation as the service sends them: the standard
// envelope, and the specification's exceptions to it (Part 7) in their own
// shapes, named so the reference shows them side by side. Each documented
// status lists its codes; a status whose codes answer in several shapes is the
// union of those shapes. Statuses every operation of a kind can answer (the
// bare 401 of a credential, the 429 of a key's rate limit, the 403 of a scope)
// are added from the route's declaration.

type Json = Record<string, unknown>;

const str = (description: string, extra: Json = {}): Json => ({ type: 'string', description, ...extra });
const int = (description: string): Json => ({ type: 'integer', description });

/** The exception shapes, as components.schemas. */
export const ERROR_SHAPES: Record<string, Json> = {
  Unauthorized: {
    type: 'object',
    description: 'The bare 401 of a missing, malformed or revoked credential. Which mistake it was is in the `WWW-Authenticate` header (RFC 6750 `error_description`); quote `x-request-id` when asking for help.',
    required: ['error'],
    properties: { error: str('Always `unauthorized`.', { const: 'unauthorized' }) },
    example: { error: 'unauthorized' },
  },
  ScopeForbidden: {
    type: 'object',
    description: 'A key without the scope the operation needs (or whose scopes could not be resolved), or a key acting on a project it may not.',
    required: ['error', 'message', 'status'],
    properties: { error: str('`forbidden`, `scopes_unresolved` or `route_scope_unresolved`.'), message: str('What was refused and what to do.'), status: { type: 'integer', const: 403, description: 'Always 403.' } },
    example: { error: 'forbidden', message: 'this API key lacks the scope projects:write', status: 403 },
  },
  RoleRequired: {
    type: 'object',
    description: "The acting user's role in the organization is below what the operation needs.",
    required: ['error', 'required'],
    properties: { error: str('`insufficient_role`, or the admin check that failed (`bearer_admin_role_missing`, `bearer_admin_user_not_member`, `bearer_admin_role_unresolved`).'), required: str('The role needed, `admin` or `owner`.'), message: str('What was refused and what to do.') },
    example: { error: 'insufficient_role', required: 'admin' },
  },
  PolicyDenial: {
    type: 'object',
    description: 'A policy of the organization denied the spend or held it for a person to approve. `approval_id`, `approval_url` and `expires_at` come with a hold.',
    required: ['reason', 'ruleType', 'ruleId'],
    properties: {
      reason: str('Why, e.g. `budget_exceeded`, `payee_denied`, `approval_required`.'),
      ruleType: str('The kind of rule that decided, e.g. `budget`.'),
      ruleId: str('The id of the rule (a policy rule) that decided.'),
      approval_id: str('The approval opened for a person to allow or deny the spend.'),
      approval_url: str('Where a person can open that approval.'),
      expires_at: str('When the approval lapses unanswered.', { format: 'date-time' }),
    },
    additionalProperties: true,
    example: { reason: 'budget_exceeded', ruleType: 'budget', ruleId: 'pol_01J9Z8Q7', approval_id: 'apr_01J9Z8R2', expires_at: '2026-11-30T12:00:00.000Z' },
  },
  RateLimited: {
    type: 'object',
    description: 'Too many requests: wait `retry_after_seconds` (also the `Retry-After` header).',
    required: ['error', 'message'],
    properties: {
      error: str('Always `rate_limited`.', { const: 'rate_limited' }),
      message: str('What was limited.'),
      limit: int('The burst the bucket holds.'),
      refill_per_second: { type: 'number', description: 'Requests the bucket regains per second.' },
      remaining: int('Requests left now.'),
      retry_after_seconds: int('Seconds until a request is admitted again.'),
    },
    additionalProperties: true,
    example: { error: 'rate_limited', message: 'too many requests for this API key', limit: 200, refill_per_second: 100, remaining: 0, retry_after_seconds: 1 },
  },
  QuotaExceeded: {
    type: 'object',
    description: 'The organization holds as many open sessions as its quota allows: close one first.',
    required: ['error', 'message'],
    properties: { error: str('Always `quota_exceeded`.', { const: 'quota_exceeded' }), message: str('What the quota is and what to do.'), limit: int('Open sessions allowed.'), current: int('Open sessions now.') },
    additionalProperties: true,
    example: { error: 'quota_exceeded', message: 'the organization has 100 open sessions, its quota: close one first', limit: 100, current: 100 },
  },
  TopLevelCode: {
    type: 'object',
    description: 'A test-mode mock refusal: the code at the top level.',
    required: ['code', 'message'],
    properties: { code: str('`mocks_not_permitted` or `tool_not_mocked`.'), message: str('What was refused and what to do.') },
    example: { code: 'mocks_not_permitted', message: 'mocks run with test keys only' },
  },
  BareError: {
    type: 'object',
    description: 'A bare error without `request_id` (read the `x-request-id` header): project resolution, the tool-call status views, the legacy routes, and not-found answers that name the server.',
    required: ['error'],
    properties: { error: str('The error code.'), message: str('What went wrong.'), server_id: str('The server that was asked for.') },
    example: { error: 'project_resolution_failed' },
  },
  FrameworkError: {
    type: 'object',
    description: "The framework's default 500 body the specification gives Pix key registration when the PSP's answer could not be read.",
    required: ['statusCode', 'error', 'message'],
    properties: { statusCode: int('Always 500.'), error: str('`Internal Server Error`.'), message: str('What went wrong.'), code: str('`pix_key_provider_malformed`.') },
    example: { statusCode: 500, error: 'Internal Server Error', message: 'the PSP answered a body that could not be read', code: 'pix_key_provider_malformed' },
  },
  VerifyFailed: {
    type: 'object',
    description: "A provider connection check that did not pass: `ok` false, with the failure's code.",
    required: ['ok', 'error'],
    properties: { ok: { type: 'boolean', const: false, description: 'Always false.' }, error: str('The failure, e.g. `credential_rejected`, `provider_unreachable`.'), message: str('What the provider answered and what to do.'), request_id: str('This request, as `x-request-id`.'), server_id: str('The provider server checked.') },
    additionalProperties: true,
    example: { ok: false, error: 'credential_rejected', message: 'the provider refused the credential: paste a current key', request_id: 'req_4f9c2a1b7d3e8f60a1b2c3d4e5f60718' },
  },
  OAuthError: {
    type: 'object',
    description: 'An OAuth endpoint error (RFC 6749 section 5.2, RFC 7591 section 3.2.2).',
    required: ['error'],
    properties: { error: str('The OAuth error code, e.g. `invalid_grant`, `invalid_client`, `invalid_redirect_uri`.'), error_description: str('What was wrong and what to do.') },
    example: { error: 'invalid_grant', error_description: 'the code was already used or has expired: start the authorization again' },
  },
};

const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });

/** Which exception shape a code answers in (the envelope when none). */
function shapeOf(status: number, code: string, oauth: boolean, url: string): string {
  if (oauth && status < 500) return 'OAuthError';
  // A tool call's views answer a malformed or invisible id bare (spec 4.3).
  if (url.startsWith('/v1/tool-calls/') && (code === 'not_found' || code === 'invalid_tool_call_id')) return 'BareError';
  if (code === 'unauthorized') return 'Unauthorized';
  if (['forbidden', 'scopes_unresolved', 'route_scope_unresolved'].includes(code)) return 'ScopeForbidden';
  if (code === 'insufficient_role' || code.startsWith('bearer_admin_')) return 'RoleRequired';
  if (['policy_denied', 'approval_required', 'budget_exceeded'].includes(code)) return 'PolicyDenial';
  if (code === 'rate_limited' || code === 'key_paste_limited') return 'RateLimited';
  if (code === 'quota_exceeded') return 'QuotaExceeded';
  if (code === 'mocks_not_permitted' || code === 'tool_not_mocked') return 'TopLevelCode';
  if (code === 'pix_key_provider_malformed') return 'FrameworkError';
  if (code === 'project_resolution_failed' || code === 'invalid_tool_call_id') return 'BareError';
  return 'ErrorEnvelope';
}

const VERIFY_CODES = new Set<string>([...VERIFY_ERRORS.map(([, c]) => c), 'tool_unknown', 'invalid_input']);

/** The codes each status answers: the declared ones, and those every route of its kind can answer. */
export function errorCodes(r: RouteSpec): Map<number, string[]> {
  const byStatus = new Map<number, string[]>();
  const add = (status: number, code: string) => {
    const codes = byStatus.get(status) ?? [];
    if (!codes.includes(code)) byStatus.set(status, [...codes, code]);
  };
  for (const [status, code] of r.errors ?? []) add(status, code);
  // What the kernel answers for any route that reads a path, a query or a body (src/http/kernel/route.ts, src/app.ts).
  if (r.params) add(400, 'invalid_params');
  if (r.query) add(400, 'invalid_query');
  if (r.body) {
    add(400, 'invalid_body');
    add(400, 'invalid_json');
  }
  // Any request that carries a body meets the body parsers first, whether the route reads one or not
  // (a CORS preflight too: an OPTIONS with a form body answers 415 before the preflight runs).
  if (r.body || r.method !== 'GET') {
    add(400, 'invalid_json');
    add(413, 'payload_too_large');
    add(415, 'unsupported_media_type');
  }
  if (r.idempotent) {
    add(400, 'invalid_idempotency_key');
    add(409, 'idempotency_key_reused');
    add(409, 'idempotency_request_in_progress');
    add(503, 'write_outcome_unknown');
  }
  if (r.auth !== 'open') add(401, 'unauthorized');
  if (r.scope) add(403, 'forbidden');
  // The platform secret without an acting user in `x-svc-user`, or a role below the route's (src/http/kernel/auth.ts).
  if (r.auth === 'key_or_service' || r.auth === 'org_admin' || r.minRole) add(403, 'insufficient_role');
  if (r.auth === 'api_key' || r.auth === 'org_admin' || r.auth === 'key_or_service') add(429, 'rate_limited');
  return byStatus;
}

/** The documented error responses of a route, by status. */
export function errorResponses(r: RouteSpec): Record<string, Json> {
  const oauth = r.tags.includes('oauth');
  const out: Record<string, Json> = {};
  for (const [status, codes] of errorCodes(r)) {
    const shapes = new Set(codes.map((c) => shapeOf(status, c, oauth, r.url)));
    // A verify route's failures are its {ok: false} body; elsewhere the same codes are enveloped.
    if (codes.some((c) => VERIFY_CODES.has(c)) && (/verify|validate/i.test(r.operationId) || codes.includes('credential_rejected'))) shapes.add('VerifyFailed');
    // A provider that is not in the catalogue: {error: not_found, server_id} (src/http/providers.ts).
    if (codes.includes('server_unknown')) shapes.add('ErrorEnvelope').add('BareError');
    const schemas = [...shapes].map(ref);
    out[String(status)] = {
      description: `Error codes: ${codes.map((c) => `\`${c}\``).join(', ')}`,
      content: { 'application/json': { schema: schemas.length === 1 ? schemas[0] : { anyOf: schemas } } },
      ...(status === 429 ? { headers: { 'Retry-After': { description: 'Seconds to wait before the next request.', schema: { type: 'integer' } } } } : {}),
      ...(status === 401 && shapes.has('Unauthorized') ? { headers: { 'WWW-Authenticate': { description: 'Which mistake it was (RFC 6750): `Bearer error="invalid_token", error_description="…"`.', schema: { type: 'string' } } } } : {}),
    };
  }
  return out;
}
