import { randomBytes } from 'node:crypto';
import { toolCallDecider, toolCallStream } from '../../commands/session.ts';
import type { Tenant } from '../../commands/consumer.ts';
import { type CommandResult, type Decider, type HandleOptions, Rejection } from '../eventstore/handler.ts';
import { GuardFailed } from '../eventstore/port.ts';
import type { ProviderDef, ToolDef } from '../providers/catalog.ts';
import type { ToolError } from '../providers/tools.ts';
import { ApiError, type RawHttpError } from './errors.ts';
import { type Denial, POLICY_ATTEMPTS, PolicyEngine, type PolicyOutcome } from '../policy/evaluator.ts';
import { policyDenied } from './approvals.ts';
import type { AppDeps } from './route.ts';

// Executes one tool of a session: resolve it in the catalog and in the
// session's attached servers, evaluate the policies, record `tool_call.started`,
// call the provider through the internal tool-execution API (the guarded
// outbound client), record `tool_call.succeeded` or `tool_call.failed`.
// Used by POST /v1/sessions/{id}/execute, the MCP endpoint and the agent loop.

export type SessionRow = { id: string; org_id: string; project_id: string; user_id: string; servers: string[]; environment: 'live' | 'test'; status: string };
export type Run = <S, C>(decider: Decider<S, C>, stream: string, command: C, opts?: HandleOptions<S> & { orgId?: string; projectId?: string | null }) => Promise<CommandResult<S>>;

export type ToolCallOutcome =
  | { ok: true; id: string; output: unknown; duration_ms: number }
  | { ok: false; id: string | null; error: ToolError | { code: string; message: string; retriable: boolean }; policy?: Denial };

/** A new tool call id: `tc_` and digits. */
export function newToolCallId(): string {
  return `tc_${(randomBytes(8).readBigUInt64BE() % 10n ** 18n).toString().padStart(18, '1')}`;
}

/** Payment or verification view a successful call opens, from the provider's category and the tool's output. */
function viewOf(p: ProviderDef, tool: ToolDef, output: unknown): { view: 'payment' | 'verification' | null; key: string | null; status: string | null; hostedUrl: string | null } {
  const o = (typeof output === 'object' && output !== null ? output : {}) as Record<string, unknown>;
  const key = [o.idempotency_key, o.id].find((k): k is string => typeof k === 'string') ?? null;
  const str = (v: unknown) => (typeof v === 'string' ? v : null);
  if (p.category === 'payments' && tool.request.method === 'POST' && key) {
    const s = str(o.status);
    return { view: 'payment', key, status: s && ['pending', 'succeeded', 'failed', 'refunded'].includes(s) ? s : 'pending', hostedUrl: null };
  }
  if (p.category === 'identity' && tool.request.method === 'POST' && key) {
    const s = str(o.status);
    return { view: 'verification', key, status: s && ['pending', 'approved', 'rejected', 'expired', 'review'].includes(s) ? s : 'pending', hostedUrl: str(o.hosted_url) };
  }
  return { view: null, key: null, status: null, hostedUrl: null };
}

/** Splits `<server>/<tool>`; the server must be attached to the session and the tool in the catalog. */
export function resolveSessionTool(deps: AppDeps, session: SessionRow, name: string): { provider: ProviderDef; tool: ToolDef } {
  const i = name.indexOf('/');
  const serverId = i > 0 ? name.slice(0, i) : '';
  const toolName = i > 0 ? name.slice(i + 1) : '';
  if (!serverId || !toolName) throw new ApiError(400, 'invalid_body', 'tool must be "<server>/<tool>"', { issues: [{ path: ['tool'], code: 'invalid_format', message: 'expected <server>/<tool>' }] });
  if (!session.servers.includes(serverId)) throw new ApiError(404, 'server_unknown', `${serverId} is not attached to this session`, { server_id: serverId });
  const r = deps.providers.resolveTool(serverId, toolName);
  if (!r) throw new ApiError(404, deps.providers.runtime.catalog.get(serverId) ? 'tool_unknown' : 'server_unknown', `no tool ${name} in the catalog`, { tool: name });
  return r;
}

/**
 * Executes one tool call. The organization's policies come first (tool name
 * `<server>/<tool>`, the session's end user as the agent); a denial or a held
 * call records nothing of the call itself and answers the policy's body.
 * `approvedBy` is set when a person approved this very call.
 */
export async function executeTool(deps: AppDeps, run: Run, session: SessionRow, name: string, input: unknown, approvedBy: string | null = null): Promise<ToolCallOutcome> {
  const { provider, tool } = resolveSessionTool(deps, session, name);
  const tenant = { orgId: session.org_id, projectId: session.project_id };
  const toolInput = (typeof input === 'object' && input !== null && !Array.isArray(input) ? input : {}) as Record<string, unknown>;
  const amount = typeof toolInput.amount_minor === 'number' && Number.isSafeInteger(toolInput.amount_minor) ? BigInt(toolInput.amount_minor) : typeof toolInput.amount_minor === 'string' && /^\d{1,16}$/.test(toolInput.amount_minor) ? BigInt(toolInput.amount_minor) : null;
  const id = newToolCallId();
  const opts = { orgId: tenant.orgId, projectId: tenant.projectId };
  const base = { tool_call_id: id, session_id: session.id, server_id: provider.id, tool_name: tool.name };
  // The policies come from this process's folded copy first, without a read;
  // `tool_call.started` is appended under the policy stream's revision, so a
  // change acknowledged anywhere before it refuses the start (nothing written)
  // and the call is evaluated again on a fresh read (as spends are).
  let policy: PolicyOutcome;
  for (let attempt = 1; ; attempt++) {
    policy = await new PolicyEngine(deps.store, deps.now).evaluate(
      { orgId: tenant.orgId, projectId: tenant.projectId, sessionId: session.id, agentId: session.user_id, toolName: `${provider.id}/${tool.name}`, toolInput, amountMinor: amount, currency: typeof toolInput.currency === 'string' ? toolInput.currency : null, approvedBy },
      run,
      { fromCache: attempt === 1 },
    );
    if (policy.decision !== 'allowed') return { ok: false, id: null, error: { code: policy.decision === 'denied' ? 'policy_denied' : 'approval_required', message: `the call was ${policy.decision === 'denied' ? 'denied' : 'held for approval'} by policy ${policy.body.ruleId}`, retriable: false }, policy: policy.body };
    try {
      await run(toolCallDecider, toolCallStream(id), {
        type: 'start',
        data: { ...base, org_id: tenant.orgId, project_id: tenant.projectId, user_id: session.user_id, input: input ?? null, routing: { server_id: provider.id, environment: session.environment, auth_type: provider.auth_type }, called_at: deps.now().toISOString() },
      }, { ...opts, expectedRevision: 'no_stream', guard: policy.guard });
      break;
    } catch (err) {
      if (!(err instanceof GuardFailed)) throw err;
      // Nothing was written: give back what the policies counted, and decide again.
      await policy.release();
      if (attempt >= POLICY_ATTEMPTS) throw new Rejection('concurrency_conflict', 'the policies kept changing; retry the request', { attempts: attempt });
    }
  }
  const started = Date.now();
  const r = await deps.providers.execute({ tenant, environment: session.environment, serverId: provider.id, toolName: tool.name, input: input ?? {}, userId: session.user_id });
  const duration_ms = Math.max(0, Date.now() - started);
  const at = deps.now().toISOString();
  if (r.ok) {
    const v = viewOf(provider, tool, r.output);
    const trail = [{ attempt: 1, server_id: provider.id, outcome: 'success', status: r.status, latency_ms: r.latency_ms }];
    await run(toolCallDecider, toolCallStream(id), {
      type: 'succeed',
      data: { ...base, output: r.output ?? null, duration_ms, connection_id: r.connection_id, idempotency_key: v.key, view: v.view, view_status: v.status, hosted_url: v.hostedUrl, failover_trail: trail, at },
    }, opts);
    return { ok: true, id, output: r.output, duration_ms };
  }
  const e = r.error;
  const trail = [{ attempt: 1, server_id: provider.id, outcome: 'error', error_code: e.code, ...(e.status ? { status: e.status } : {}) }];
  await run(toolCallDecider, toolCallStream(id), { type: 'fail', data: { ...base, error_code: e.code, error_message: e.message.slice(0, 500), retriable: e.retriable, duration_ms, failover_trail: trail, at } }, opts);
  await policy.release();
  return { ok: false, id, error: e };
}

/** The HTTP error of a failed call. Provider faults are 502 provider_error (retriable when the provider's fault is). */
export function toolCallError(o: Extract<ToolCallOutcome, { ok: false }>): ApiError | RawHttpError {
  // A policy denial is the spec's bare 403 {reason, ruleType, ruleId} (+ approval_id, expires_at).
  if (o.policy) return policyDenied(o.policy);
  const e = o.error;
  const details = { ...(o.id ? { tool_call_id: o.id } : {}), retriable: e.retriable, ...('status' in e && e.status ? { provider_status: e.status } : {}), ...('issues' in e && e.issues ? { issues: e.issues } : {}) };
  switch (e.code) {
    case 'not_connected':
      return new ApiError(424, 'not_connected', e.message, details);
    case 'invalid_input':
      return new ApiError(400, 'invalid_input', e.message, details);
    case 'policy_denied':
    case 'approval_required':
      return new ApiError(403, e.code, e.message, details);
    default:
      return new ApiError(502, 'provider_error', e.message, { ...details, reason: e.code, retriable: e.code === 'provider_error' || e.code === 'provider_unreachable' ? true : e.retriable });
  }
}
