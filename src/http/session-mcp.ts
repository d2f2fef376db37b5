import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { mcpServerSdk } from '../adapters/mcp/sdk.ts';
import type { RunCommand } from '../usecases/context.ts';
import { executeTool, ToolUnresolved } from '../usecases/session-tools.ts';
import { activeSession, getSession, type SessionRow } from '../usecases/sessions.ts';
import { envelope } from './kernel/errors.ts';
import { defineRoute, type AppDeps, type Ctx } from './kernel/route.ts';
import { IdParam } from './kernel/schemas.ts';
import { MCP_ORIGIN_ERRORS, mcpOriginHook, mcpPreflight } from './kernel/mcp-browser.ts';
import { tenantOf } from './kernel/auth.ts';

/** A JSON-RPC 2.0 answer of the MCP endpoint (the result of initialize, tools/list or tools/call, or an error). */
const JsonRpcResponse = z
  .object({
    jsonrpc: z.literal('2.0').describe('Always `2.0`.'),
    id: z.union([z.string(), z.number(), z.null()]).describe('The `id` of the request this answers.'),
    result: z.record(z.string(), z.unknown()).optional().describe('What the method returned (for `tools/call`: `content`, `structuredContent`, `isError`); absent on an error.'),
    error: z
      .object({ code: z.number().int().describe('The JSON-RPC error code (e.g. -32601 method not found).'), message: z.string().describe('What went wrong.'), data: z.unknown().optional().describe('More about the error.') })
      .optional()
      .describe('Why the request failed; absent on success.'),
  })
  .meta({ id: 'JsonRpcResponse', description: 'A JSON-RPC 2.0 response (MCP Streamable HTTP, answered as JSON).' });

// The session's tools over MCP Streamable HTTP (stateless: a server and a
// transport per request, JSON responses). Tool names are `<server>.<tool>`
// (MCP names allow [A-Za-z0-9._-]); a call runs exactly as
// POST /v1/sessions/{id}/execute does (the use case executeTool), recorded as
// a tool call. A provider's or caller's fault is a tool result with isError,
// not a protocol error.

export const mcpToolName = (serverId: string, tool: string) => `${serverId}.${tool}`;

async function mcpServer(deps: AppDeps, run: RunCommand, s: SessionRow): Promise<Server> {
  const { Server, ListToolsRequestSchema, CallToolRequestSchema } = await mcpServerSdk();
  const server = new Server({ name: `session-${s.id}`, version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: s.servers.flatMap((id) => {
      const p = deps.providers.runtime.catalog.get(id);
      return (p?.tools ?? []).map((tl) => ({ name: mcpToolName(p!.id, tl.name), description: tl.description, inputSchema: tl.input_schema as { type: 'object'; [k: string]: unknown } }));
    }),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req) => {
    const name = req.params.name;
    const i = name.indexOf('.');
    try {
      const o = await executeTool(deps, run, s, i > 0 ? `${name.slice(0, i)}/${name.slice(i + 1)}` : name, req.params.arguments ?? {});
      if (o.ok) return { content: [{ type: 'text' as const, text: JSON.stringify(o.output) }], structuredContent: { tool_call_id: o.id, output: o.output as unknown }, isError: false };
      return { content: [{ type: 'text' as const, text: `${o.error.code}: ${o.error.message}` }], structuredContent: { tool_call_id: o.id, error_code: o.error.code }, isError: true };
    } catch (err) {
      if (err instanceof ToolUnresolved) return { content: [{ type: 'text' as const, text: `${err.code}: ${err.message}` }], isError: true };
      throw err;
    }
  });
  return server;
}

export async function sessionMcpRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  // Origin and Host checked before anything runs (DNS rebinding), CORS for the allowed origins: src/http/kernel/mcp-browser.ts.
  mcpOriginHook(app, deps);
  defineRoute(
    app,
    deps,
    mcpPreflight({ url: '/v1/sessions/:id/mcp', params: z.object({ id: IdParam }), operationId: 'sessionMcpPreflight', tag: 'sessions' }, [
      'authorization', 'content-type', 'accept', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id', 'x-svc-project', 'x-request-id',
    ]),
  );
  // Stateless Streamable HTTP offers no standalone SSE stream: a GET answers 405
  // (as the transport's specification allows), never a stream left open for ever.
  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/sessions/:id/mcp',
    operationId: 'sessionMcpGet',
    summary: 'No standalone SSE stream (stateless Streamable HTTP): 405; POST JSON-RPC messages',
    tags: ['sessions'],
    auth: 'key_or_service',
    scope: 'sessions:write',
    params: z.object({ id: IdParam }),
    responses: { 405: null },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], ...MCP_ORIGIN_ERRORS, [404, 'not_found'], [405, 'method_not_allowed']],
    async handler(ctx) {
      // Another tenant's session answers as an absent one, as on POST.
      await getSession(ctx.deps, await tenantOf(ctx), ctx.params.id);
      return { status: 405, headers: { allow: 'POST' }, body: envelope('method_not_allowed', 'the session MCP endpoint is stateless: POST JSON-RPC messages; there is no standalone SSE stream', String(ctx.req.id)) };
    },
  });
  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/sessions/:id/mcp',
    operationId: 'sessionMcpPost',
    summary: "The session's tools over MCP Streamable HTTP (stateless; JSON-RPC initialize, tools/list, tools/call)",
    tags: ['sessions'],
    auth: 'key_or_service',
    scope: 'sessions:write',
    params: z.object({ id: IdParam }),
    body: z.unknown(),
    responses: { 200: z.union([JsonRpcResponse, z.array(JsonRpcResponse)]), 202: null, 400: null, 405: null, 406: null, 415: null },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], ...MCP_ORIGIN_ERRORS, [404, 'not_found'], [409, 'session_closed']],
    async handler(ctx: Ctx<{ id: string }, unknown, unknown, never>) {
      const s = await activeSession(ctx.deps, await tenantOf(ctx as never), ctx.params.id);
      const { WebStandardStreamableHTTPServerTransport } = await mcpServerSdk();
      const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      const server = await mcpServer(ctx.deps, ctx.run.bind(ctx), s);
      await server.connect(transport);
      const headers = new Headers();
      for (const [k, v] of Object.entries(ctx.req.headers)) if (typeof v === 'string') headers.set(k, v);
      const request = new Request(`http://localhost${ctx.req.url}`, { method: 'POST', headers, body: JSON.stringify(ctx.body ?? null) });
      try {
        const res = await transport.handleRequest(request, { parsedBody: ctx.body });
        const text = await res.text();
        const out: Record<string, string> = {};
        res.headers.forEach((v, k) => (out[k] = v));
        if (!out['content-type']) out['content-type'] = 'application/json';
        return { status: res.status, headers: out, ...(text ? { body: text } : {}) };
      } finally {
        await server.close().catch(() => {});
      }
    },
  } as never);
}