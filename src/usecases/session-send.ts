import { modelConfigFromEnv, OpenAIChatModel } from '../adapters/model/openai-chat.ts';
import { type ChatMessage, type Model, ModelError, type ModelTool } from '../adapters/model/port.ts';
import { Rejection } from '../eventstore/handler.ts';
import type { Ports, RunCommand, Tenant } from './context.ts';
import { executeTool, ToolUnresolved } from './session-tools.ts';
import { activeSession, type SessionRow } from './sessions.ts';

// The agent loop of a session: the model (port; the live adapter is
// OpenAI-compatible chat completions, configured by MODEL_BASE_URL /
// MODEL_API_KEY / MODEL_NAME, else `not_wired`) sees the session's tools as
// functions `<server>__<tool>`; each tool call it asks for runs exactly as an
// executed tool (executeTool: recorded, sealed); the loop ends when the model
// answers without tool calls, or after AGENT_MAX_STEPS turns. What happens is
// emitted as it happens (assistant_text, tool_use, tool_result: AgentEvent); the answer
// is {message, tool_calls, iterations}. A model's failure is `model_error`.

export const AGENT_MAX_STEPS = 8;
const SEP = '__';

/** One tool call of the loop: `id` is the recorded call (tc_...), null when none was recorded (a refusal before the call). */
export type AgentToolCall = {
  id: string | null;
  tool_name: string;
  server_id: string;
  status: 'success' | 'error';
  duration_ms: number | null;
  input: unknown;
  output: unknown;
  error_code: string | null;
};
export type SendResult = { message: string; tool_calls: AgentToolCall[]; iterations: number };

/**
 * What the loop emits as it happens. A tool result is the call's record
 * (AgentToolCall, `id` the recorded tc_... call) with beside it `name`
 * ("<server>/<tool>"), `is_error`, `tool_call_id` (= id), `call_id` (the
 * model's id, which ties it to its tool_use) and `error_message` (why, when
 * it failed). `iteration` numbers the model's turns from 1.
 */
export type ToolResultData = AgentToolCall & { name: string; is_error: boolean; tool_call_id: string | null; call_id: string; error_message: string | null };
export type AgentEvent =
  | { event: 'assistant_text'; data: { content: string; iteration: number } }
  | { event: 'tool_use'; data: { id: string; name: string; input: unknown } }
  | { event: 'tool_result'; data: ToolResultData };

function toolsOf(ports: Pick<Ports, 'providers'>, s: SessionRow): ModelTool[] {
  return s.servers.flatMap((id) => {
    const p = ports.providers.runtime.catalog.get(id);
    return (p?.tools ?? []).map((tl) => ({ type: 'function' as const, function: { name: `${p!.id}${SEP}${tl.name}`, description: tl.description, parameters: tl.input_schema } }));
  });
}

/** The active session and the configured model a message is sent to (`not_found`, `session_closed`, `not_wired`). */
export async function agentOf(ports: Ports, tenant: Tenant, sessionId: string): Promise<{ session: SessionRow; model: Model }> {
  const session = await activeSession(ports, tenant, sessionId);
  const cfg = modelConfigFromEnv();
  if (!cfg) throw new Rejection('not_wired', 'no model is configured (MODEL_BASE_URL, MODEL_API_KEY, MODEL_NAME)');
  return { session, model: new OpenAIChatModel(cfg, ports.webhookTargets) };
}

/** Runs the loop for one message; a model's failure is the rejection `model_error` (retriable). */
export async function sendMessage(ports: Ports, run: RunCommand, model: Model, s: SessionRow, message: string, emit: (e: AgentEvent) => void): Promise<SendResult> {
  try {
    return await agentLoop(ports, run, model, s, message, emit);
  } catch (err) {
    if (err instanceof ModelError) throw new Rejection('model_error', err.message, { retriable: true });
    throw err;
  }
}

/** One tool call the model asked for, run as an executed tool; a refusal is an error the model reads. */
async function callTool(ports: Ports, run: RunCommand, s: SessionRow, name: string, args: unknown): Promise<{ call: AgentToolCall; why: string | null }> {
  const i = name.indexOf('/');
  const server_id = i > 0 ? name.slice(0, i) : '';
  const tool_name = i > 0 ? name.slice(i + 1) : name;
  const failed = (id: string | null, duration_ms: number | null, code: string, why: string | null) => ({ call: { id, tool_name, server_id, status: 'error' as const, duration_ms, input: args, output: null, error_code: code }, why });
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return failed(null, null, 'invalid_arguments', null);
  try {
    const o = await executeTool(ports, run, s, name, args);
    if (o.ok) return { call: { id: o.id, tool_name, server_id, status: 'success', duration_ms: o.duration_ms, input: args, output: o.output ?? null, error_code: null }, why: null };
    return failed(o.id, o.id === null ? null : o.duration_ms, o.error.code, o.error.message);
  } catch (err) {
    if (!(err instanceof ToolUnresolved)) throw err;
    return failed(null, null, err.code, err.message);
  }
}

export async function agentLoop(ports: Ports, run: RunCommand, model: Model, s: SessionRow, message: string, emit: (e: AgentEvent) => void): Promise<SendResult> {
  const tool_calls: AgentToolCall[] = [];
  const tools = toolsOf(ports, s);
  const messages: ChatMessage[] = [
    { role: 'system', content: `You act for end user ${s.user_id} with the tools of these providers: ${s.servers.join(', ')}.` },
    { role: 'user', content: message },
  ];
  let iterations = 0;
  while (iterations < AGENT_MAX_STEPS) {
    const r = await model.complete(messages, tools);
    iterations++;
    if (r.content) emit({ event: 'assistant_text', data: { content: r.content, iteration: iterations } });
    if (r.tool_calls.length === 0) return { message: r.content ?? '', tool_calls, iterations };
    messages.push({ role: 'assistant', content: r.content, tool_calls: r.tool_calls });
    for (const c of r.tool_calls) {
      const name = c.function.name.replace(SEP, '/');
      let args: unknown;
      try {
        args = JSON.parse(c.function.arguments || '{}');
      } catch {
        args = null;
      }
      emit({ event: 'tool_use', data: { id: c.id, name, input: args } });
      const { call, why } = await callTool(ports, run, s, name, args);
      tool_calls.push(call);
      const output = call.status === 'success' ? call.output : { error: call.error_code, ...(why ? { message: why } : {}) };
      emit({ event: 'tool_result', data: { ...call, name, is_error: call.status === 'error', tool_call_id: call.id, call_id: c.id, error_message: why } });
      messages.push({ role: 'tool', tool_call_id: c.id, content: JSON.stringify(output) });
    }
  }
  return { message: 'the agent stopped after the most steps it may take', tool_calls, iterations };
}
