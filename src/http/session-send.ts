import { PassThrough } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { modelConfigFromEnv, OpenAIChatModel } from '../adapters/model/openai-chat.ts';
import { type ChatMessage, type Model, ModelError, type ModelTool } from '../adapters/model/port.ts';
import { ApiError } from './errors.ts';
import { defineRoute, type AppDeps } from './route.ts';
import { IdParam } from './schemas.ts';
import { readSession, tenantOf } from './sessions.ts';
import { executeTool, type Run, type SessionRow } from './tool-exec.ts';

// POST /v1/sessions/{id}/send {"message": "..."}: the agent loop. The model
// (port; the live adapter is OpenAI-compatible chat completions, configured by
// MODEL_BASE_URL / MODEL_API_KEY / MODEL_NAME, else 501 not_wired) sees the
// session's tools as functions `<server>__<tool>`; each tool call it asks for
// runs exactly as POST .../execute (recorded, sealed); the loop ends when the
// model answers without tool calls, or after AGENT_MAX_STEPS turns. It answers
// the product client's shape {message, tool_calls, iterations}. With
// `Accept: text/event-stream` the same loop streams, in the order things
// happen: user_message, assistant_text {content} (each model turn with text),
// tool_use {id, name, input} and tool_result {id, name, output, is_error} per
// call (id: the model's call id, which ties the two), then done {message,
// tool_calls, iterations}, or error {error, message} when the loop fails.

export const AGENT_MAX_STEPS = 8;
const SEP = '__';

/** One tool call of the loop: `id` is the recorded call (tc_...), null when none was recorded (a refusal before the call). */
export const AgentToolCall = z.object({
  id: z.string().nullable(),
  tool_name: z.string(),
  server_id: z.string(),
  status: z.enum(['success', 'error']),
  duration_ms: z.number().int().nullable(),
  input: z.unknown(),
  output: z.unknown(),
  error_code: z.string().nullable(),
});
type AgentToolCall = z.infer<typeof AgentToolCall>;

const SendResult = z.object({ message: z.string(), tool_calls: z.array(AgentToolCall), iterations: z.number().int() }).meta({ id: 'SendResult' });

/** The stream's events (documented as the text/event-stream answer: one `event:` name per member). */
const SendStreamEvents = z
  .object({
    user_message: z.object({ content: z.string() }),
    assistant_text: z.object({ content: z.string() }),
    tool_use: z.object({ id: z.string(), name: z.string(), input: z.unknown() }),
    tool_result: z.object({ id: z.string(), name: z.string(), output: z.unknown(), is_error: z.boolean(), tool_call_id: z.string().nullable() }),
    error: z.object({ error: z.string(), message: z.string() }),
    done: SendResult,
  })
  .meta({ id: 'SendStreamEvents', description: 'Server-sent events, each `event: <member>` with `data:` the member\'s JSON, in the order they happen: user_message, then per model turn assistant_text (when it has text) and tool_use/tool_result per call, then done; error instead of done when the loop fails' });

export type AgentEvent =
  | { event: 'assistant_text'; data: { content: string } }
  | { event: 'tool_use'; data: { id: string; name: string; input: unknown } }
  | { event: 'tool_result'; data: { id: string; name: string; output: unknown; is_error: boolean; tool_call_id: string | null } };

function toolsOf(deps: AppDeps, s: SessionRow): ModelTool[] {
  return s.servers.flatMap((id) => {
    const p = deps.providers.runtime.catalog.get(id);
    return (p?.tools ?? []).map((tl) => ({ type: 'function' as const, function: { name: `${p!.id}${SEP}${tl.name}`, description: tl.description, parameters: tl.input_schema } }));
  });
}

export async function agentLoop(deps: AppDeps, run: Run, model: Model, s: SessionRow, message: string, emit: (e: AgentEvent) => void): Promise<z.infer<typeof SendResult>> {
  const tool_calls: AgentToolCall[] = [];
  const tools = toolsOf(deps, s);
  const messages: ChatMessage[] = [
    { role: 'system', content: `You act for end user ${s.user_id} with the tools of these providers: ${s.servers.join(', ')}.` },
    { role: 'user', content: message },
  ];
  let iterations = 0;
  while (iterations < AGENT_MAX_STEPS) {
    const r = await model.complete(messages, tools);
    iterations++;
    if (r.content) emit({ event: 'assistant_text', data: { content: r.content } });
    if (r.tool_calls.length === 0) return { message: r.content ?? '', tool_calls, iterations };
    messages.push({ role: 'assistant', content: r.content, tool_calls: r.tool_calls });
    for (const c of r.tool_calls) {
      const name = c.function.name.replace(SEP, '/');
      const i = name.indexOf('/');
      const server_id = i > 0 ? name.slice(0, i) : '';
      const tool_name = i > 0 ? name.slice(i + 1) : name;
      let args: unknown;
      try {
        args = JSON.parse(c.function.arguments || '{}');
      } catch {
        args = null;
      }
      emit({ event: 'tool_use', data: { id: c.id, name, input: args } });
      let call: AgentToolCall;
      let why: string | null = null;
      if (typeof args !== 'object' || args === null || Array.isArray(args)) {
        call = { id: null, tool_name, server_id, status: 'error', duration_ms: null, input: args, output: null, error_code: 'invalid_arguments' };
      } else {
        try {
          const o = await executeTool(deps, run, s, name, args);
          if (o.ok) call = { id: o.id, tool_name, server_id, status: 'success', duration_ms: o.duration_ms, input: args, output: o.output ?? null, error_code: null };
          else {
            call = { id: o.id, tool_name, server_id, status: 'error', duration_ms: o.id === null ? null : o.duration_ms, input: args, output: null, error_code: o.error.code };
            why = o.error.message;
          }
        } catch (err) {
          if (!(err instanceof ApiError)) throw err;
          call = { id: null, tool_name, server_id, status: 'error', duration_ms: null, input: args, output: null, error_code: err.code };
          why = err.message;
        }
      }
      tool_calls.push(call);
      const output = call.status === 'success' ? call.output : { error: call.error_code, ...(why ? { message: why } : {}) };
      emit({ event: 'tool_result', data: { id: c.id, name, output, is_error: call.status === 'error', tool_call_id: call.id } });
      messages.push({ role: 'tool', tool_call_id: c.id, content: JSON.stringify(output) });
    }
  }
  return { message: 'the agent stopped after the most steps it may take', tool_calls, iterations };
}

export async function sessionSendRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/sessions/:id/send',
    operationId: 'sendSessionMessage',
    summary: 'Send a natural-language message: the agent loop turns it into tool calls; answers {message, tool_calls, iterations}, or with Accept: text/event-stream the events user_message, assistant_text, tool_use, tool_result, done (or error)',
    tags: ['sessions'],
    auth: 'key_or_service',
    scope: 'sessions:write',
    params: z.object({ id: IdParam }),
    body: z.object({ message: z.string().min(1).max(32_000) }),
    responses: { 200: SendResult },
    sse: SendStreamEvents,
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [409, 'session_closed'], [501, 'not_wired'], [502, 'model_error']],
    async handler(ctx) {
      const tenant = await tenantOf(ctx as never);
      const s = await readSession(ctx.deps, tenant, ctx.params.id);
      if (!s) throw new ApiError(404, 'not_found', 'session not found');
      if (s.status !== 'active') throw new ApiError(409, 'session_closed', 'the session is closed');
      const cfg = modelConfigFromEnv();
      if (!cfg) throw new ApiError(501, 'not_wired', 'no model is configured (MODEL_BASE_URL, MODEL_API_KEY, MODEL_NAME)');
      const model = new OpenAIChatModel(cfg, ctx.deps.webhookTargets);
      const run = ctx.run.bind(ctx) as Run;
      const accept = ctx.req.headers.accept ?? '';
      if (!accept.includes('text/event-stream')) {
        try {
          return { status: 200, body: await agentLoop(ctx.deps, run, model, s, ctx.body.message, () => {}) };
        } catch (err) {
          if (err instanceof ModelError) throw new ApiError(502, 'model_error', err.message, { retriable: true });
          throw err;
        }
      }
      const out = new PassThrough();
      let n = 0;
      const send = (event: string, data: unknown) => out.write(`event: ${event}\nid: ${++n}\ndata: ${JSON.stringify(data)}\n\n`);
      send('user_message', { content: ctx.body.message });
      void agentLoop(ctx.deps, run, model, s, ctx.body.message, (e) => send(e.event, e.data))
        .then((r) => send('done', r))
        .catch((err) => {
          if (!(err instanceof ModelError)) ctx.req.log.error({ err }, 'the agent loop failed');
          send('error', err instanceof ModelError ? { error: 'model_error', message: err.message } : { error: 'internal_error', message: 'the agent loop failed' });
        })
        .finally(() => out.end());
      return { status: 200, body: out, headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' } };
    },
  });
}
