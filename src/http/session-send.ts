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
// model answers without tool calls, or after AGENT_MAX_STEPS turns. With
// `Accept: text/event-stream` the steps stream as SSE: `tool_call` per call,
// `message` for the final answer, `done` (or `error`).

export const AGENT_MAX_STEPS = 8;
const SEP = '__';

export type AgentStep =
  | { type: 'tool_call'; tool: string; tool_call_id: string | null; status: 'success' | 'error'; output?: unknown; error_code?: string }
  | { type: 'message'; content: string };

function toolsOf(deps: AppDeps, s: SessionRow): ModelTool[] {
  return s.servers.flatMap((id) => {
    const p = deps.providers.runtime.catalog.get(id);
    return (p?.tools ?? []).map((tl) => ({ type: 'function' as const, function: { name: `${p!.id}${SEP}${tl.name}`, description: tl.description, parameters: tl.input_schema } }));
  });
}

export async function agentLoop(deps: AppDeps, run: Run, model: Model, s: SessionRow, message: string, emit: (step: AgentStep) => void): Promise<{ content: string; steps: AgentStep[] }> {
  const steps: AgentStep[] = [];
  const push = (st: AgentStep) => (steps.push(st), emit(st));
  const tools = toolsOf(deps, s);
  const messages: ChatMessage[] = [
    { role: 'system', content: `You act for end user ${s.user_id} with the tools of these providers: ${s.servers.join(', ')}.` },
    { role: 'user', content: message },
  ];
  for (let turn = 0; turn < AGENT_MAX_STEPS; turn++) {
    const r = await model.complete(messages, tools);
    if (r.tool_calls.length === 0) {
      const content = r.content ?? '';
      push({ type: 'message', content });
      return { content, steps };
    }
    messages.push({ role: 'assistant', content: r.content, tool_calls: r.tool_calls });
    for (const c of r.tool_calls) {
      const name = c.function.name.replace(SEP, '/');
      let args: unknown;
      try {
        args = JSON.parse(c.function.arguments || '{}');
      } catch {
        args = null;
      }
      let result: string;
      if (typeof args !== 'object' || args === null || Array.isArray(args)) {
        push({ type: 'tool_call', tool: name, tool_call_id: null, status: 'error', error_code: 'invalid_arguments' });
        result = JSON.stringify({ error: 'invalid_arguments' });
      } else {
        try {
          const o = await executeTool(deps, run, s, name, args);
          push(o.ok ? { type: 'tool_call', tool: name, tool_call_id: o.id, status: 'success', output: o.output } : { type: 'tool_call', tool: name, tool_call_id: o.id, status: 'error', error_code: o.error.code });
          result = JSON.stringify(o.ok ? o.output : { error: o.error.code, message: o.error.message });
        } catch (err) {
          if (!(err instanceof ApiError)) throw err;
          push({ type: 'tool_call', tool: name, tool_call_id: null, status: 'error', error_code: err.code });
          result = JSON.stringify({ error: err.code, message: err.message });
        }
      }
      messages.push({ role: 'tool', tool_call_id: c.id, content: result });
    }
  }
  const content = 'the agent stopped after the most steps it may take';
  push({ type: 'message', content });
  return { content, steps };
}

export async function sessionSendRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/sessions/:id/send',
    operationId: 'sendSessionMessage',
    summary: 'Send a natural-language message: the agent loop turns it into tool calls (SSE steps with Accept: text/event-stream)',
    tags: ['sessions'],
    auth: 'key_or_service',
    scope: 'sessions:write',
    params: z.object({ id: IdParam }),
    body: z.object({ message: z.string().min(1).max(32_000) }),
    responses: {
      200: z.union([
        z.object({ session_id: z.string(), message: z.string(), steps: z.array(z.record(z.string(), z.unknown())) }),
        z.unknown(),
      ]),
    },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [409, 'session_closed'], [501, 'not_wired'], [502, 'model_error']],
    async handler(ctx) {
      const tenant = await tenantOf(ctx as never);
      const s = await readSession(ctx.deps, tenant, ctx.params.id);
      if (!s) throw new ApiError(404, 'not_found', 'session not found');
      if (s.status !== 'open') throw new ApiError(409, 'session_closed', 'the session is closed');
      const cfg = modelConfigFromEnv();
      if (!cfg) throw new ApiError(501, 'not_wired', 'no model is configured (MODEL_BASE_URL, MODEL_API_KEY, MODEL_NAME)');
      const model = new OpenAIChatModel(cfg, ctx.deps.webhookTargets);
      const run = ctx.run.bind(ctx) as Run;
      const accept = ctx.req.headers.accept ?? '';
      if (!accept.includes('text/event-stream')) {
        try {
          const r = await agentLoop(ctx.deps, run, model, s, ctx.body.message, () => {});
          return { status: 200, body: { session_id: s.id, message: r.content, steps: r.steps } };
        } catch (err) {
          if (err instanceof ModelError) throw new ApiError(502, 'model_error', err.message, { retriable: true });
          throw err;
        }
      }
      const out = new PassThrough();
      let n = 0;
      const send = (event: string, data: unknown) => out.write(`event: ${event}\nid: ${++n}\ndata: ${JSON.stringify(data)}\n\n`);
      void agentLoop(ctx.deps, run, model, s, ctx.body.message, (st) => send(st.type, st))
        .then((r) => send('done', { session_id: s.id, message: r.content, steps: r.steps.length }))
        .catch((err) => send('error', { code: err instanceof ModelError ? 'model_error' : 'internal_error', message: err instanceof ModelError ? err.message : 'the agent loop failed' }))
        .finally(() => out.end());
      return { status: 200, body: out, headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' } };
    },
  });
}
