import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { mcpCallDecider, mcpCallStream } from '../../commands/mcp.ts';
import type { Network } from '../adapters/chain/x402.ts';
import { callUpstreamTool, listUpstreamToolsFull, type Upstream, UpstreamError } from '../adapters/mcp/upstream.ts';
import { type CommandContext, handleCommand } from '../eventstore/handler.ts';
import { defaultMcpConfig } from '../mcp/config.ts';
import { settleToolPayment, SettlementUnknown, type PricedCall } from '../mcp/settle.ts';
import { b64json, type Payment, paymentOf, paymentRequiredV1, paymentRequiredV2, readPayment, requirementsFor } from '../x402/payment.ts';
import { X402Refusal } from '../x402/verify.ts';
import { ApiError } from './errors.ts';
import { MCP_ORIGIN_ERRORS, mcpOriginHook, mcpPreflight } from './mcp-browser.ts';
import { defineRoute, type AppDeps, type Reply } from './route.ts';

// The paying gateway `/mcp/<slug>`: MCP Streamable HTTP towards agents (the
// SDK's server side, stateless, JSON responses), the SDK client towards the
// merchant's upstream. `initialize` and `tools/list` pass through (each tool
// with its price); `tools/call` of a priced tool needs an x402 payment, which
// arrives by either of x402's transports (docs/decisions.md, "MCP gateway:
// x402's MCP transport"):
// - MCP (x402 v2 `specs/transports-v2/mcp.md`, the default): an unpaid call is
//   answered with a tool result `isError: true` whose `structuredContent` is the
//   PaymentRequired (and `content[0].text` its JSON); the retry carries the
//   PaymentPayload in `params._meta["x402/payment"]`; the result carries the
//   SettleResponse in `_meta["x402/payment-response"]`.
// - HTTP: a `PAYMENT-SIGNATURE` (v2) or `X-PAYMENT` (v1) header; a refusal, or an
//   unpaid call that asks for it with `Prefer: x402=http`, answers HTTP 402 with
//   `PAYMENT-REQUIRED`; the answer carries `PAYMENT-RESPONSE`.
// Either way the call is settled by the one path of src/mcp/settle.ts (verify,
// claim the nonce, settle on chain, record the paid call with its fee), inside
// the tool call, before the upstream is called. A settled call whose upstream
// fails is recorded refundable.

const META_PAYMENT = 'x402/payment';
const META_RESPONSE = 'x402/payment-response';

/** RFC 7240 `Prefer: x402=http`: the client pays over HTTP and wants the 402 for an unpaid call. */
export const prefersHttp402 = (h: string | string[] | undefined) => [h ?? []].flat().some((v) => /(^|[,;\s])x402\s*=\s*"?http"?\s*($|[,;])/i.test(v));

type ServerRow = { id: string; org_id: string; project_id: string; slug: string; name: string; upstream_url: string; upstream_auth_header: string | null; upstream_auth_ref: string | null; environment: 'live' | 'test'; payto_address: string; platform_fee_bps: number; active: boolean };
type ToolRow = { tool_name: string; description: string; price: string; price_atomic: string; active: boolean };

const Slug = z.object({ slug: z.string().min(1).max(64) });

/** The 402 body of the HTTP transport: x402 v1's PaymentRequirementsResponse (v2's PaymentRequired is the PAYMENT-REQUIRED header). */
const PaymentRequiredV1 = z
  .object({
    x402Version: z.literal(1),
    error: z.string(),
    accepts: z.array(
      z.object({
        scheme: z.literal('exact'),
        network: z.string(),
        maxAmountRequired: z.string(),
        resource: z.string(),
        description: z.string(),
        mimeType: z.string(),
        payTo: z.string(),
        maxTimeoutSeconds: z.number().int(),
        asset: z.string(),
        extra: z.object({ name: z.string(), version: z.string() }),
      }),
    ),
  })
  .meta({ id: 'X402PaymentRequiredV1' });

const GATEWAY_DESCRIPTION = [
  'A priced `tools/call` is paid with x402 (v2, scheme `exact`, USDC), by either of its transports; docs/api.md has a worked example.',
  '',
  "**x402's MCP transport (default).** An unpaid call answers HTTP 200 with the JSON-RPC result `{isError: true, structuredContent: <PaymentRequired>, content: [{type: \"text\", text: <the same PaymentRequired as JSON>}]}`; PaymentRequired is `{x402Version: 2, error, resource: {url, description, mimeType}, accepts: [{scheme, network (CAIP-2), amount, asset, payTo, maxTimeoutSeconds, extra: {name, version}}]}`. Retry the same call with the PaymentPayload object in `params._meta[\"x402/payment\"]`; the result carries `_meta[\"x402/payment-response\"]` = `{success, payer, transaction, network}` and `_meta.call_id`. A refused payment answers the PaymentRequired again with the reason in `error` (`authorization_already_used`, `amount_mismatch`, `payee_authorization_mismatch`, `invalid_payment`, `settlement_failed`, ...).",
  '',
  "**x402's HTTP transport.** Send `PAYMENT-SIGNATURE` (v2) or `X-PAYMENT` (v1): base64 JSON of the PaymentPayload. A refusal, or an unpaid call sent with `Prefer: x402=http`, answers 402 with `PAYMENT-REQUIRED` (base64 JSON of the v2 PaymentRequired) and the v1 PaymentRequirementsResponse as the body; success carries `PAYMENT-RESPONSE` (v2) or `X-PAYMENT-RESPONSE` (v1). A request carrying both a header and `_meta` is paid by the header alone.",
  '',
  'Either way a payment settles once (the facilitator nonce claim), before the upstream is called; an upstream that fails after settlement is recorded refundable (`_meta["x402/refundable"]: true`).',
].join('\n');

const JsonRpc = z.union([z.record(z.string(), z.unknown()), z.array(z.record(z.string(), z.unknown())).max(50)]);

export async function mcpGatewayRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const cfg = deps.mcp ?? defaultMcpConfig(deps.baseUrl);
  // Origin and Host checked before anything runs (DNS rebinding), CORS for the allowed origins: src/http/mcp-browser.ts.
  mcpOriginHook(app, deps);
  defineRoute(
    app,
    deps,
    mcpPreflight({ url: '/mcp/:slug', params: Slug, operationId: 'mcpGatewayPreflight', tag: 'mcp-gateway' }, [
      'content-type', 'accept', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id', 'payment-signature', 'x-payment', 'prefer', 'x-request-id',
    ]),
  );

  defineRoute(app, deps, {
    method: 'GET',
    url: '/mcp/:slug',
    operationId: 'mcpGatewayStream',
    summary: 'The gateway offers no standalone SSE stream (stateless Streamable HTTP): 405',
    tags: ['mcp-gateway'],
    auth: 'open',
    params: Slug,
    responses: { 405: null },
    errors: [...MCP_ORIGIN_ERRORS, [405, 'method_not_allowed']],
    async handler() {
      throw new ApiError(405, 'method_not_allowed', 'the gateway is stateless: POST JSON-RPC messages; there is no standalone SSE stream');
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/mcp/:slug',
    operationId: 'mcpGateway',
    summary: "MCP Streamable HTTP to a monetized server; a priced tools/call is paid with x402, over x402's MCP transport (_meta) or its HTTP transport (headers)",
    description: GATEWAY_DESCRIPTION,
    tags: ['mcp-gateway'],
    auth: 'open',
    params: Slug,
    body: JsonRpc,
    responses: { 200: z.unknown(), 202: null, 402: PaymentRequiredV1 },
    responseHeaders: {
      200: { 'PAYMENT-RESPONSE': 'HTTP transport, v2 payment: base64 JSON SettleResponse {success, payer, transaction, network}', 'X-PAYMENT-RESPONSE': 'HTTP transport, v1 payment: the same' },
      402: { 'PAYMENT-REQUIRED': 'base64 JSON of the x402 v2 PaymentRequired {x402Version: 2, error, resource, accepts}' },
    },
    errors: [[400, 'invalid_body'], [400, 'mcp_protocol_error'], ...MCP_ORIGIN_ERRORS, [404, 'not_found'], [406, 'mcp_protocol_error'], [415, 'mcp_protocol_error'], [502, 'settlement_outcome_unknown'], [503, 'facilitator_unavailable']],
    async handler({ params, body, req }): Promise<Reply> {
      const { rows } = await deps.db.query<ServerRow>(
        `SELECT id, org_id, project_id, slug, name, upstream_url, upstream_auth_header, upstream_auth_ref, environment, payto_address, platform_fee_bps, active FROM mcp_servers WHERE slug = $1`,
        [params.slug],
      );
      const server = rows[0];
      if (!server || !server.active) throw new ApiError(404, 'not_found', 'no such MCP server');
      const tools = (await deps.db.query<ToolRow>(`SELECT tool_name, description, price, price_atomic::text, active FROM mcp_tools WHERE server_id = $1 ORDER BY ordinal`, [server.id])).rows;
      const priced = new Map(tools.filter((t) => t.active).map((t) => [t.tool_name, t]));
      const network: Network | undefined = server.environment === 'live' ? deps.x402?.live : deps.x402?.test;
      const ctx: CommandContext = { orgId: server.org_id, projectId: server.project_id, actor: { kind: 'system', id: 'mcp-gateway' }, requestId: String(req.id), now: deps.now };
      const record = async (c: Parameters<typeof mcpCallDecider.decide>[0], callId: string) => {
        const r = await handleCommand(deps.store, mcpCallDecider, mcpCallStream(callId), c, ctx);
        if (r.lastPosition) await deps.readSide.waitFor(r.lastPosition, deps.readWaitMs);
      };

      // The one priced call in this request, if any.
      const messages = Array.isArray(body) ? body : [body];
      const calls = messages.filter((m) => m.method === 'tools/call');
      if (calls.length > 1) throw new ApiError(400, 'invalid_body', 'one tools/call per request', { issues: [{ path: [], code: 'too_many_calls', message: 'one tools/call per request' }] });
      const callParams = calls[0]?.params as { name?: unknown; _meta?: Record<string, unknown> } | undefined;
      const paidTool = calls.length > 0 && typeof callParams?.name === 'string' ? priced.get(callParams.name) : undefined;

      let pricing: { call: PricedCall; required: (error: string) => ReturnType<typeof paymentRequiredV2>; http402: (error: string) => Reply } | undefined;
      // The HTTP transport: a payment header, or an unpaid call that prefers the 402 (and carries no MCP payment).
      let httpPayment: Payment | null = null;
      let overHttp = false;
      if (paidTool) {
        if (!network) throw new ApiError(503, 'facilitator_unavailable', `no ${server.environment} settlement network is configured`, { retriable: true });
        const reqs = requirementsFor(network, server.payto_address, BigInt(paidTool.price_atomic));
        const resource = { url: `${cfg.gatewayUrl.replace(/\/+$/, '')}/mcp/${server.slug}`, description: `${server.name}: ${paidTool.tool_name} (${paidTool.price} USDC per call)` };
        pricing = {
          call: { server, tool: paidTool, network, requirements: reqs },
          required: (error) => paymentRequiredV2(reqs, resource, error),
          http402: (error) => ({ status: 402, headers: { 'payment-required': b64json(paymentRequiredV2(reqs, resource, error)) }, body: paymentRequiredV1(network, reqs, resource, error) }),
        };
        try {
          httpPayment = readPayment(req.headers);
        } catch (err) {
          if (err instanceof X402Refusal) return pricing.http402(err.code);
          throw err;
        }
        overHttp = httpPayment !== null || (callParams?._meta?.[META_PAYMENT] === undefined && prefersHttp402(req.headers.prefer));
      }
      // What the HTTP transport answers instead of the MCP exchange (a refusal: 402; an unknown outcome: 502), and its PAYMENT-RESPONSE.
      let httpAnswer: Reply | SettlementUnknown | undefined;
      let httpHeaders: Record<string, string> = {};
      const settlementDeps = { store: deps.store, now: deps.now, waitFor: (p: Parameters<typeof deps.readSide.waitFor>[0]) => deps.readSide.waitFor(p, deps.readWaitMs) };

      // The MCP exchange itself, through the SDK's server transport.
      const upstream: Upstream = { url: server.upstream_url, headers: {} };
      if (server.upstream_auth_header && server.upstream_auth_ref) {
        const secret = await deps.vault.get(server.org_id, server.upstream_auth_ref);
        if (secret) upstream.headers[server.upstream_auth_header] = secret.toString('utf8');
      }
      const mcp = new Server({ name: `gateway:${server.slug}`, version: '1.0.0' }, { capabilities: { tools: {} } });
      mcp.setRequestHandler(ListToolsRequestSchema, async () => {
        const listed = await listUpstreamToolsFull(upstream, deps.webhookTargets, cfg.timeouts).catch((err: unknown) => {
          throw new Error(err instanceof UpstreamError ? `upstream ${err.code}` : 'upstream unavailable');
        });
        return {
          tools: listed
            .filter((t) => priced.has(t.name))
            .map((t) => {
              const p = priced.get(t.name)!;
              return { ...t, description: p.description || t.description, _meta: { ...(t._meta as object | undefined), 'x402/price': { price: p.price, price_atomic: p.price_atomic, currency: 'USDC', network: network?.name ?? null, pay_to: server.payto_address } } };
            }),
        };
      });
      mcp.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
        if (!pricing || request.params.name !== pricing.call.tool.tool_name) return { isError: true, content: [{ type: 'text', text: `unknown or inactive tool ${request.params.name}` }] };
        const p = pricing;
        // x402's MCP transport: the PaymentRequired as the tool's (error) result, in structuredContent and as JSON text.
        const mcpRequired = (error: string): CallToolResult => {
          const pr = p.required(error);
          return { isError: true, structuredContent: pr, content: [{ type: 'text', text: JSON.stringify(pr) }] };
        };
        const refuse = (error: string): CallToolResult => {
          if (!overHttp) return mcpRequired(error);
          httpAnswer = p.http402(error);
          return { isError: true, content: [{ type: 'text', text: error }] };
        };
        let payment = httpPayment;
        if (!overHttp) {
          const meta = request.params._meta?.[META_PAYMENT];
          if (meta === undefined) return mcpRequired('payment_required');
          try {
            payment = paymentOf(meta);
          } catch (err) {
            if (err instanceof X402Refusal) return mcpRequired(err.code);
            throw err;
          }
        }
        if (!payment) return refuse('payment_required');
        let outcome;
        try {
          outcome = await settleToolPayment(settlementDeps, ctx, p.call, payment);
        } catch (err) {
          if (!(err instanceof SettlementUnknown)) throw err;
          if (overHttp) {
            httpAnswer = err;
            return { isError: true, content: [{ type: 'text', text: err.message }] };
          }
          // Not a PaymentRequired (no `accepts`): paying again could pay twice.
          return { isError: true, structuredContent: { x402Version: 2, error: 'settlement_outcome_unknown', transaction: err.txHash }, content: [{ type: 'text', text: `${err.message} (transaction ${err.txHash})` }] };
        }
        if (!outcome.ok) return refuse(outcome.error);
        const { callId, response } = outcome.settled;
        if (overHttp) httpHeaders = payment.version === 2 ? { 'payment-response': b64json(response) } : { 'x-payment-response': b64json(response) };
        const paidMeta = { call_id: callId, [META_RESPONSE]: response };
        try {
          const r = await callUpstreamTool(upstream, deps.webhookTargets, cfg.timeouts, request.params.name, request.params.arguments);
          if (r.isError === true) {
            // The tool itself reported failure: the payer got nothing it paid for.
            await record({ type: 'upstream_failed', callId, error: 'tool_error' }, callId);
            return { ...r, _meta: { ...r._meta, ...paidMeta, 'x402/refundable': true } };
          }
          await record({ type: 'completed', callId, isError: false }, callId);
          return { ...r, _meta: { ...r._meta, ...paidMeta } };
        } catch (err) {
          const code = err instanceof UpstreamError ? err.code : 'call_failed';
          await record({ type: 'upstream_failed', callId, error: code }, callId);
          return { isError: true, content: [{ type: 'text', text: `the upstream failed (${code}); the payment is recorded as refundable (call ${callId})` }], _meta: { ...paidMeta, 'x402/refundable': true } };
        }
      });
      const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      await mcp.connect(transport);
      try {
        const headers = new Headers();
        // The body is handed over parsed; only the headers that say how to speak MCP pass.
        for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && (k === 'accept' || k === 'content-type' || k.startsWith('mcp-') || k === 'last-event-id')) headers.set(k, v);
        const webReq = new Request(`http://gateway.internal/mcp/${server.slug}`, { method: 'POST', headers, body: JSON.stringify(body) });
        const res = await transport.handleRequest(webReq, { parsedBody: body });
        const text = await res.text();
        if (res.status >= 400) {
          // The transport refused the request (headers, protocol version, JSON-RPC shape): the envelope, with its JSON-RPC error.
          let rpc: unknown = null;
          try {
            rpc = JSON.parse(text);
          } catch {}
          throw new ApiError(res.status, 'mcp_protocol_error', ((rpc as { error?: { message?: string } })?.error?.message ?? 'the MCP request was refused').slice(0, 300), { jsonrpc: rpc });
        }
        if (httpAnswer instanceof SettlementUnknown) throw httpAnswer;
        if (httpAnswer) return httpAnswer;
        const out: Record<string, string> = { ...httpHeaders };
        res.headers.forEach((v, k) => {
          if (k !== 'content-length') out[k] = v;
        });
        return { status: res.status, headers: out, body: text === '' ? undefined : text };
      } finally {
        await mcp.close().catch(() => {});
      }
    },
  });
}
