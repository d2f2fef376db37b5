import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { mcpCallDecider, mcpCallStream, platformFee } from '../../commands/mcp.ts';
import type { Network } from '../adapters/chain/x402.ts';
import { callUpstreamTool, listUpstreamToolsFull, type Upstream, UpstreamError } from '../adapters/mcp/upstream.ts';
import { type CommandContext, handleCommand } from '../eventstore/handler.ts';
import { defaultMcpConfig } from '../mcp/config.ts';
import { b64json, claimNonce, paymentRequiredV1, paymentRequiredV2, readPayment, releaseNonce, type Requirements, requirementsFor, settle, settleResponse, verifyPayment } from '../x402/payment.ts';
import { X402Refusal } from '../x402/verify.ts';
import { ApiError } from './errors.ts';
import { newId } from './ids.ts';
import { defineRoute, type AppDeps, type Reply } from './route.ts';

// The paying gateway `/mcp/<slug>`: MCP Streamable HTTP towards agents (the
// SDK's server side, stateless, JSON responses), the SDK client towards the
// merchant's upstream. `initialize` and `tools/list` pass through (each tool
// with its price); `tools/call` of a priced tool needs an x402 payment:
// without one → HTTP 402 with `PAYMENT-REQUIRED`; with `PAYMENT-SIGNATURE`
// (v2) or `X-PAYMENT` (v1) → verify, claim the nonce, settle on chain, record
// the paid call, forward upstream, answer with `PAYMENT-RESPONSE`. A settled
// call whose upstream fails is recorded refundable.

type ServerRow = { id: string; org_id: string; project_id: string; slug: string; name: string; upstream_url: string; upstream_auth_header: string | null; upstream_auth_ref: string | null; environment: 'live' | 'test'; payto_address: string; platform_fee_bps: number; active: boolean };
type ToolRow = { tool_name: string; description: string; price: string; price_atomic: string; active: boolean };

const JsonRpc = z.union([z.record(z.string(), z.unknown()), z.array(z.record(z.string(), z.unknown())).max(50)]);

export async function mcpGatewayRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const cfg = deps.mcp ?? defaultMcpConfig(deps.baseUrl);

  defineRoute(app, deps, {
    method: 'GET',
    url: '/mcp/:slug',
    operationId: 'mcpGatewayStream',
    summary: 'The gateway offers no standalone SSE stream (stateless Streamable HTTP): 405',
    tags: ['mcp-gateway'],
    auth: 'open',
    params: z.object({ slug: z.string().min(1).max(64) }),
    responses: { 405: null },
    errors: [[405, 'method_not_allowed']],
    async handler() {
      throw new ApiError(405, 'method_not_allowed', 'the gateway is stateless: POST JSON-RPC messages; there is no standalone SSE stream');
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/mcp/:slug',
    operationId: 'mcpGateway',
    summary: 'MCP Streamable HTTP to a monetized server; priced tools/call is paid with x402 (PAYMENT-SIGNATURE or X-PAYMENT)',
    tags: ['mcp-gateway'],
    auth: 'open',
    params: z.object({ slug: z.string().min(1).max(64) }),
    body: JsonRpc,
    responses: { 200: z.unknown(), 202: null, 402: z.unknown() },
    errors: [[400, 'invalid_body'], [400, 'mcp_protocol_error'], [402, 'payment_required'], [404, 'not_found'], [406, 'mcp_protocol_error'], [415, 'mcp_protocol_error'], [502, 'settlement_outcome_unknown'], [503, 'facilitator_unavailable']],
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
      const callParams = calls[0]?.params as { name?: unknown } | undefined;
      const paidTool = calls.length > 0 && typeof callParams?.name === 'string' ? priced.get(callParams.name) : undefined;
      if (calls.length > 1) throw new ApiError(400, 'invalid_body', 'one tools/call per request', { issues: [{ path: [], code: 'too_many_calls', message: 'one tools/call per request' }] });

      let paid: { callId: string; headers: Record<string, string> } | undefined;
      if (paidTool) {
        if (!network) throw new ApiError(503, 'facilitator_unavailable', `no ${server.environment} settlement network is configured`, { retriable: true });
        const price = BigInt(paidTool.price_atomic);
        const reqs = requirementsFor(network, server.payto_address, price);
        const resource = { url: `${cfg.gatewayUrl.replace(/\/+$/, '')}/mcp/${server.slug}`, description: `${server.name}: ${paidTool.tool_name} (${paidTool.price} USDC per call)` };
        const required = (error: string): Reply => ({
          status: 402,
          headers: { 'payment-required': b64json(paymentRequiredV2(reqs, resource, error)) },
          body: paymentRequiredV1(network, reqs, resource, error),
        });
        let payment;
        try {
          payment = readPayment(req.headers);
        } catch (err) {
          if (err instanceof X402Refusal) return required(err.code);
          throw err;
        }
        if (!payment) return required('payment_required');
        const callId = newId('mcpcall');
        let verified;
        try {
          verified = await verifyPayment(network, reqs, payment, deps.now());
          await claimNonce(deps.store, ctx, verified, callId);
        } catch (err) {
          if (err instanceof X402Refusal) return required(err.code);
          throw err;
        }
        const result = await settle(network, verified);
        if (result.outcome === 'not_sent') {
          await releaseNonce(deps.store, ctx, verified, callId, 'settlement_failed');
          return required('settlement_failed');
        }
        if (result.outcome === 'reverted') return required('settlement_failed');
        if (result.outcome === 'unknown') throw new ApiError(502, 'settlement_outcome_unknown', 'the payment was broadcast but its outcome is not known yet', { tx_hash: result.txHash });
        await record(
          {
            type: 'settled',
            data: {
              call_id: callId,
              server_id: server.id,
              org_id: server.org_id,
              project_id: server.project_id,
              tool_name: paidTool.tool_name,
              environment: server.environment,
              network: network.name,
              payer: verified.signer,
              pay_to: server.payto_address,
              nonce: verified.authorization.nonce.toLowerCase(),
              price_atomic: price.toString(),
              platform_fee_bps: server.platform_fee_bps,
              fee_atomic: platformFee(price, server.platform_fee_bps).toString(),
              tx_hash: result.txHash,
              x402_version: payment.version,
            },
          },
          callId,
        );
        const settled = b64json(settleResponse(network, verified.signer, result.txHash));
        paid = { callId, headers: payment.version === 2 ? { 'payment-response': settled } : { 'x-payment-response': settled } };
      }

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
        if (!paid || !priced.has(request.params.name)) return { isError: true, content: [{ type: 'text', text: `unknown or inactive tool ${request.params.name}` }] };
        try {
          const r = await callUpstreamTool(upstream, deps.webhookTargets, cfg.timeouts, request.params.name, request.params.arguments);
          if (r.isError === true) {
            // The tool itself reported failure: the payer got nothing it paid for.
            await record({ type: 'upstream_failed', callId: paid.callId, error: 'tool_error' }, paid.callId);
            return { ...r, _meta: { ...r._meta, 'x402/refundable': true, call_id: paid.callId } };
          }
          await record({ type: 'completed', callId: paid.callId, isError: false }, paid.callId);
          return { ...r, _meta: { ...r._meta, call_id: paid.callId } };
        } catch (err) {
          const code = err instanceof UpstreamError ? err.code : 'call_failed';
          await record({ type: 'upstream_failed', callId: paid.callId, error: code }, paid.callId);
          return { isError: true, content: [{ type: 'text', text: `the upstream failed (${code}); the payment is recorded as refundable (call ${paid.callId})` }], _meta: { 'x402/refundable': true, call_id: paid.callId } };
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
        const out: Record<string, string> = { ...paid?.headers };
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
