import { PassThrough } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { Rejection } from '../eventstore/handler.ts';
import { agentOf, sendMessage } from '../usecases/session-send.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';
import { IdParam } from './kernel/schemas.ts';
import { tenantOf } from './kernel/auth.ts';

// POST /v1/sessions/{id}/send {"message": "..."}: the agent loop
// (src/usecases/session-send.ts) turns the message into tool calls, each run
// exactly as POST .../execute (recorded, sealed); without a model 501
// not_wired. It answers the product client's shape {message, tool_calls,
// iterations}. With `Accept: text/event-stream` the same loop streams, in the
// order things happen: user_message, assistant_text {content, iteration}
// (each model turn with text), tool_use {id, name, input} (id: the model's
// call id) and tool_result per call (the ToolCallRecord {id (tc_...),
// tool_name, server_id, status, duration_ms, input, output, error_code} with
// name, is_error, tool_call_id, call_id (the tool_use's id), error_message),
// then done {message, tool_calls, iterations}, or error {error, message}.
// Every data object also carries `type` (the event's name), and tool_result
// and done repeat themselves as `toolCall` and `result`: the product's
// TypeScript client reads the event name and the members, its Python client
// reads only `data:` lines and dispatches on `type`.

/** One tool call of the loop: `id` is the recorded call (tc_...), null when none was recorded (a refusal before the call). */
export const AgentToolCall = z.object({
  id: z.string().nullable(),
  tool_name: z.string(),
  server_id: z.string(),
  status: z.enum(['success', 'error']).describe('`success`, or `error` (`error_code` says which).'),
  duration_ms: z.number().int().nullable(),
  input: z.unknown(),
  output: z.unknown(),
  error_code: z.string().nullable(),
});

const SendResult = z.object({ message: z.string(), tool_calls: z.array(AgentToolCall).describe('The tool calls the agent made for this message, in order.'), iterations: z.number().int() }).meta({ id: 'SendResult' });

/** The name of a stream event, repeated in its data. */
const EVENT_TYPE = <T extends string>(name: T) => z.literal(name).describe('The event\'s name, as in its `event:` line.');

const ToolResultEvent = AgentToolCall.extend({
  type: EVENT_TYPE('tool_result'),
  name: z.string().meta({ description: '"<server>/<tool>" as the model named it' }),
  is_error: z.boolean().describe('True when the call failed (then `error_message` says why).'),
  tool_call_id: z.string().nullable().meta({ description: 'the recorded call (= id)' }),
  call_id: z.string().meta({ description: "the model's call id: the tool_use event's id" }),
  error_message: z.string().nullable().meta({ description: 'why the call failed; null on success' }),
  toolCall: AgentToolCall.meta({ description: 'the same record, for clients that dispatch on type' }),
});

/** The stream's events (documented as the text/event-stream answer: one `event:` name per member). */
const SendStreamEvents = z
  .object({
    user_message: z.object({ type: EVENT_TYPE('user_message'), content: z.string().describe('The message sent, as received.') }).describe('The message the agent received; first.'),
    assistant_text: z.object({ type: EVENT_TYPE('assistant_text'), content: z.string().describe('What the model wrote in this turn.'), iteration: z.number().int().meta({ description: "the model's turn, from 1" }) }).describe('Text the model wrote in a turn (when it wrote any).'),
    tool_use: z.object({ type: EVENT_TYPE('tool_use'), id: z.string(), name: z.string(), input: z.unknown() }).describe('The model asks for a tool call.'),
    tool_result: ToolResultEvent.describe('What the tool call answered.'),
    error: z.object({ type: EVENT_TYPE('error'), error: z.string(), message: z.string() }).describe('The loop failed; the stream ends.'),
    done: SendResult.extend({ type: EVENT_TYPE('done'), result: SendResult.meta({ description: 'the same answer, for clients that dispatch on type' }) }).describe('The loop ended: the answer, as the JSON answer gives it; last.'),
  })
  .meta({ id: 'SendStreamEvents', description: "Server-sent events, each `event: <member>` with `data:` the member's JSON (which also names it in `type`), in the order they happen: user_message, then per model turn assistant_text (when it has text) and tool_use/tool_result per call, then done; error instead of done when the loop fails" });

/** The data of one stream event: its members, its name as `type`, and the record or the answer again under the name the Python client reads. */
function wireData(event: string, data: Record<string, unknown>): Record<string, unknown> {
  if (event === 'tool_result') {
    const { id, tool_name, server_id, status, duration_ms, input, output, error_code } = data;
    return { type: event, ...data, toolCall: { id, tool_name, server_id, status, duration_ms, input, output, error_code } };
  }
  if (event === 'done') return { type: event, ...data, result: data };
  return { type: event, ...data };
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
      const { session, model } = await agentOf(ctx.deps, await tenantOf(ctx), ctx.params.id);
      const run = ctx.run.bind(ctx);
      const accept = ctx.req.headers.accept ?? '';
      if (!accept.includes('text/event-stream')) return { status: 200, body: await sendMessage(ctx.deps, run, model, session, ctx.body.message, () => {}) };
      const out = new PassThrough();
      let n = 0;
      const send = (event: string, data: Record<string, unknown>) => out.write(`event: ${event}\nid: ${++n}\ndata: ${JSON.stringify(wireData(event, data))}\n\n`);
      send('user_message', { content: ctx.body.message });
      void sendMessage(ctx.deps, run, model, session, ctx.body.message, (e) => send(e.event, e.data))
        .then((r) => send('done', r))
        .catch((err) => {
          const modelError = err instanceof Rejection && err.code === 'model_error';
          if (!modelError) ctx.req.log.error({ err }, 'the agent loop failed');
          send('error', modelError ? { error: 'model_error', message: err.message } : { error: 'internal_error', message: 'the agent loop failed' });
        })
        .finally(() => out.end());
      return { status: 200, body: out, headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' } };
    },
  });
}
