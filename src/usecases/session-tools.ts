import { randomBytes } from 'node:crypto';
import { toolCallDecider, toolCallStream } from '../../commands/session.ts';
import { Rejection } from '../eventstore/handler.ts';
import { type AppendGuard, GuardFailed } from '../eventstore/port.ts';
import type { ProviderDef, ToolDef } from '../providers/catalog.ts';
import type { ToolError, ToolResult } from '../providers/tools.ts';
import { type Denial, POLICY_ATTEMPTS, type PolicyCall, PolicyEngine } from '../policy/evaluator.ts';
import type { ApprovalExecutor } from './approval-executors.ts';
import type { Ports, RunCommand } from './context.ts';
import { heldCallSession, type SessionRow } from './sessions.ts';

// Executes one tool of a session: resolve it in the catalog and in the
// session's attached servers, evaluate the policies, record `tool_call.started`,
// call the provider through the internal tool-execution API (the guarded
// outbound client), record `tool_call.succeeded` or `tool_call.failed`.
// Called by POST /v1/sessions/{id}/execute, the session MCP endpoint, the agent
// loop and approval execution (providerToolExecutor). In a session created with
// test-mode mocks, a mocked tool's call is recorded (routing.mocked) and
// answered with the mock, the provider never called; any other tool is refused
// (tool_not_mocked) with nothing recorded.

type CallError = ToolError | { code: string; message: string; retriable: boolean };
/** A recorded call: its id, what it called, when, and how long the provider took. */
type Recorded = { id: string; server_id: string; tool_name: string; called_at: string; duration_ms: number };
export type ToolCallOutcome =
  | ({ ok: true; output: unknown; mocked: boolean } & Recorded)
  /** Recorded and failed: `ran` when it reached the provider's side (not a refused input or a missing connection). */
  | ({ ok: false; ran: boolean; error: CallError; policy?: undefined } & Recorded)
  /** Never recorded: a policy's denial or hold, or a mocked session's tool without a mock. */
  | { ok: false; id: null; ran?: undefined; error: CallError; policy?: Denial };

/** A tool name the session cannot resolve (malformed, a server not attached, a tool not in the catalog): refused before anything is recorded. */
export class ToolUnresolved extends Rejection {}

/** Failures that never reached the provider: the call's request was refused before it left. */
const NOT_RAN = new Set(['invalid_input', 'not_connected']);

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

/**
 * A bare tool name (the product's `execute codespar_pay --server asaas`) with
 * the server given beside it, else the one attached server that has it, as
 * `<server>/<tool>`; a name already qualified is kept. Several attached servers
 * with the tool and none named: `invalid_body` naming them.
 */
export function qualifyToolName(ports: Pick<Ports, 'providers'>, session: Pick<SessionRow, 'servers'>, name: string, server?: string): string {
  if (name.includes('/')) return name;
  if (server) return `${server}/${name}`;
  const holders = session.servers.filter((s) => ports.providers.resolveTool(s, name));
  if (holders.length > 1) {
    const message = `several attached servers have ${name} (${holders.join(', ')}): name one in "server", or call "<server>/${name}"`;
    throw new ToolUnresolved('invalid_body', message, { issues: [{ path: ['server'], code: 'ambiguous_tool', message }] });
  }
  if (holders.length === 0) {
    const message = `no server attached to this session has a tool ${name}: call "<server>/<tool>", name the server in "server", or attach it`;
    throw new ToolUnresolved('invalid_body', message, { issues: [{ path: ['tool'], code: 'invalid_format', message }] });
  }
  return `${holders[0]}/${name}`;
}

/** Splits `<server>/<tool>` (a bare name is qualified first); the server must be attached to the session and the tool in the catalog. */
export function resolveSessionTool(ports: Pick<Ports, 'providers'>, session: SessionRow, bare: string): { provider: ProviderDef; tool: ToolDef } {
  const name = qualifyToolName(ports, session, bare);
  const i = name.indexOf('/');
  const serverId = i > 0 ? name.slice(0, i) : '';
  const toolName = i > 0 ? name.slice(i + 1) : '';
  if (!serverId || !toolName) throw new ToolUnresolved('invalid_body', 'tool must be "<server>/<tool>"', { issues: [{ path: ['tool'], code: 'invalid_format', message: 'expected <server>/<tool>' }] });
  if (!session.servers.includes(serverId)) throw new ToolUnresolved('server_unknown', `${serverId} is not attached to this session`, { server_id: serverId });
  const r = ports.providers.resolveTool(serverId, toolName);
  if (!r) throw new ToolUnresolved(ports.providers.runtime.catalog.get(serverId) ? 'tool_unknown' : 'server_unknown', `no tool ${name} in the catalog`, { tool: name });
  return r;
}

/** The amount a policy budget counts: the input's `amount_minor` (integer, or a string of digits), else none. */
export function amountOf(input: Record<string, unknown>): bigint | null {
  const a = input.amount_minor;
  if (typeof a === 'number' && Number.isSafeInteger(a)) return BigInt(a);
  if (typeof a === 'string' && /^\d{1,16}$/.test(a)) return BigInt(a);
  return null;
}

export type GatedCall = Pick<PolicyCall, 'toolName' | 'toolInput' | 'amountMinor' | 'currency' | 'approvedBy'>;

/**
 * The organization's policies over one call of a session (the session's end
 * user as the agent), then `start` appended under the policy set it was
 * decided on. The policies come from this process's folded copy first,
 * without a read; a change acknowledged anywhere before the start refuses it
 * (nothing written) and the call is evaluated again on a fresh read (as
 * spends are). A denial or a hold starts nothing. Used by tool calls and
 * proxy calls alike.
 */
export async function underPolicy(
  ports: Pick<Ports, 'store' | 'now' | 'baseUrl'>,
  run: RunCommand,
  session: SessionRow,
  call: GatedCall,
  start: (guard: AppendGuard) => Promise<unknown>,
): Promise<{ ok: true; release(): Promise<void> } | { ok: false; code: 'policy_denied' | 'approval_required'; message: string; denial: Denial }> {
  for (let attempt = 1; ; attempt++) {
    const policy = await new PolicyEngine(ports.store, ports.now, ports.baseUrl).evaluate(
      { orgId: session.org_id, projectId: session.project_id, sessionId: session.id, agentId: session.user_id, ...call },
      run,
      { fromCache: attempt === 1 },
    );
    if (policy.decision !== 'allowed') {
      const denied = policy.decision === 'denied';
      return { ok: false, code: denied ? 'policy_denied' : 'approval_required', message: `the call was ${denied ? 'denied' : 'held for approval'} by policy ${policy.body.ruleId}`, denial: policy.body };
    }
    try {
      await start(policy.guard);
      return { ok: true, release: () => policy.release() };
    } catch (err) {
      if (!(err instanceof GuardFailed)) throw err;
      // Nothing was written: give back what the policies counted, and decide again.
      await policy.release();
      if (attempt >= POLICY_ATTEMPTS) throw new Rejection('concurrency_conflict', 'the policies kept changing; retry the request', { attempts: attempt });
    }
  }
}

/**
 * Executes one tool call. The organization's policies come first (tool name
 * `<server>/<tool>`, the session's end user as the agent); a denial or a held
 * call records nothing of the call itself and answers the policy's body.
 * `approvedBy` is set when a person approved this very call. Throws
 * ToolUnresolved when the name does not resolve in the session.
 */
export async function executeTool(ports: Ports, run: RunCommand, session: SessionRow, name: string, input: unknown, approvedBy: string | null = null): Promise<ToolCallOutcome> {
  const { provider, tool } = resolveSessionTool(ports, session, name);
  const key = `${provider.id}/${tool.name}`;
  // A mocked session (test keys only, checked at creation) answers from its mocks, and only from them.
  const mocked = session.mocks ? Object.hasOwn(session.mocks, key) : false;
  if (session.mocks && !mocked) return { ok: false, id: null, error: { code: 'tool_not_mocked', message: `this session was created with mocks and has none for ${key}`, retriable: false } };
  const tenant = { orgId: session.org_id, projectId: session.project_id };
  const toolInput = (typeof input === 'object' && input !== null && !Array.isArray(input) ? input : {}) as Record<string, unknown>;
  const amount = amountOf(toolInput);
  const id = newToolCallId();
  const calledAt = ports.now().toISOString();
  const opts = { orgId: tenant.orgId, projectId: tenant.projectId };
  const base = { tool_call_id: id, session_id: session.id, server_id: provider.id, tool_name: tool.name };
  const gate = await underPolicy(ports, run, session, { toolName: key, toolInput, amountMinor: amount, currency: typeof toolInput.currency === 'string' ? toolInput.currency : null, approvedBy }, (guard) =>
    run(toolCallDecider, toolCallStream(id), {
      type: 'start',
      data: { ...base, org_id: tenant.orgId, project_id: tenant.projectId, user_id: session.user_id, input: input ?? null, routing: { server_id: provider.id, environment: session.environment, auth_type: provider.auth_type, ...(mocked ? { mocked: true } : {}) }, called_at: calledAt },
    }, { ...opts, expectedRevision: 'no_stream', guard }),
  );
  if (!gate.ok) return { ok: false, id: null, error: { code: gate.code, message: gate.message, retriable: false }, policy: gate.denial };
  const policy = gate;
  const started = Date.now();
  const r: ToolResult = mocked
    ? { ok: true, output: session.mocks![key], status: 200, latency_ms: 0, connection_id: null }
    : await ports.providers.execute({ tenant, environment: session.environment, serverId: provider.id, toolName: tool.name, input: input ?? {}, userId: session.user_id });
  const recorded = { id, server_id: provider.id, tool_name: tool.name, called_at: calledAt };
  const duration_ms = Math.max(0, Date.now() - started);
  const at = ports.now().toISOString();
  if (r.ok) {
    const v = viewOf(provider, tool, r.output);
    const trail = [{ attempt: 1, server_id: provider.id, outcome: 'success', status: r.status, latency_ms: r.latency_ms }];
    await run(toolCallDecider, toolCallStream(id), {
      type: 'succeed',
      data: { ...base, output: r.output ?? null, duration_ms, connection_id: r.connection_id, idempotency_key: v.key, view: v.view, view_status: v.status, hosted_url: v.hostedUrl, failover_trail: trail, at },
    }, opts);
    return { ok: true, ...recorded, output: r.output, duration_ms, mocked };
  }
  const e = r.error;
  const trail = [{ attempt: 1, server_id: provider.id, outcome: 'error', error_code: e.code, ...(e.status ? { status: e.status } : {}) }];
  await run(toolCallDecider, toolCallStream(id), { type: 'fail', data: { ...base, error_code: e.code, error_message: e.message.slice(0, 500), retriable: e.retriable, duration_ms, failover_trail: trail, at } }, opts);
  await policy.release();
  return { ok: false, ...recorded, ran: !NOT_RAN.has(e.code), error: e, duration_ms };
}

/**
 * The rejection of a failed call: a policy's denial or hold carries its body
 * (answered bare), a mocked session's missing mock `tool_not_mocked`, a refused
 * input `invalid_input`, a missing connection `not_connected`; any provider
 * fault is `provider_error` (retriable when the provider's fault is).
 */
export function toolCallRejection(o: Extract<ToolCallOutcome, { ok: false }>): Rejection {
  const e = o.error;
  if (o.policy) return new Rejection(e.code, e.message, o.policy);
  if (e.code === 'tool_not_mocked') return new Rejection(e.code, e.message);
  const details = { ...(o.id ? { tool_call_id: o.id } : {}), retriable: e.retriable, ...('status' in e && e.status ? { provider_status: e.status } : {}), ...('issues' in e && e.issues ? { issues: e.issues } : {}) };
  if (e.code === 'not_connected' || e.code === 'invalid_input') return new Rejection(e.code, e.message, details);
  return new Rejection('provider_error', e.message, { ...details, reason: e.code, retriable: e.code === 'provider_error' || e.code === 'provider_unreachable' ? true : e.retriable });
}

/** Approval execution of a provider tool call (`<server>/<tool>`): runs in its session, with the held input verbatim. */
export const providerToolExecutor: ApprovalExecutor = async (call, ports, run) => {
  const s = await heldCallSession(ports, call);
  const o = await executeTool(ports, run, s, call.tool_name, call.tool_input, call.decided_by ?? 'approval');
  if (!o.ok) throw toolCallRejection(o);
  return { tool_call_id: o.id, output: (o.output ?? null) as unknown, duration_ms: o.duration_ms };
};
