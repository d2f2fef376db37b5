import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { CallToolRequest, CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { mcpServerSdk } from '../adapters/mcp/sdk.ts';
import { mcpCallDecider, mcpCallStream } from '../../commands/mcp.ts';
import type { Network } from '../adapters/chain/x402.ts';
import { callUpstreamTool, listUpstreamToolsFull, type Upstream, UpstreamError } from '../adapters/mcp/upstream.ts';
import { type CommandContext, handleCommand, Rejection } from '../eventstore/handler.ts';
import { defaultMcpConfig, type McpConfig } from '../mcp/config.ts';
import { settleToolPayment, SettlementUnknown, type PricedCall, type Settled } from '../mcp/settle.ts';
import { type Payment, paymentOf, paymentRequiredV1, paymentRequiredV2, readPayment, requirementsFor } from '../x402/payment.ts';
import { X402Refusal } from '../x402/verify.ts';
import type { Ports } from './context.ts';

// The paying gateway `/mcp/<slug>` (the route: src/http/mcp-gateway.ts): MCP
// Streamable HTTP towards agents (the SDK's server side, stateless, JSON
// responses), the SDK client towards the merchant's upstream. `initialize` and
// `tools/list` pass through (each tool with its price); `tools/call` of a
// priced tool needs an x402 payment, which arrives by either of x402's
// transports (docs/decisions.md, "MCP gateway: x402's MCP transport"):
// - MCP (x402 v2 `specs/transports-v2/mcp.md`, the default): an unpaid call is
//   answered with a tool result `isError: true` whose `structuredContent` is the
//   PaymentRequired (and `content[0].text` its JSON); the retry carries the
//   PaymentPayload in `params._meta["x402/payment"]`; the result carries the
//   SettleResponse in `_meta["x402/payment-response"]`.
// - HTTP: a `PAYMENT-SIGNATURE` (v2) or `X-PAYMENT` (v1) header; a refusal, or an
//   unpaid call that asks for it with `Prefer: x402=http`, is answered with the
//   PaymentRequired instead of the MCP exchange (the route's 402).
// Either way the call is settled by the one path of src/mcp/settle.ts (verify,
// claim the nonce, settle on chain, record the paid call with its fee), inside
// the tool call, before the upstream is called. A settled call whose upstream
// fails is recorded refundable.

const META_PAYMENT = 'x402/payment';
const META_RESPONSE = 'x402/payment-response';

/** RFC 7240 `Prefer: x402=http`: the client pays over HTTP and wants the PaymentRequired for an unpaid call. */
export const prefersHttp402 = (h: string | string[] | undefined) => [h ?? []].flat().some((v) => /(^|[,;\s])x402\s*=\s*"?http"?\s*($|[,;])/i.test(v));

type ServerRow = { id: string; org_id: string; project_id: string; slug: string; name: string; upstream_url: string; upstream_auth_header: string | null; upstream_auth_ref: string | null; environment: 'live' | 'test'; payto_address: string; platform_fee_bps: number; active: boolean };
type ToolRow = { tool_name: string; description: string; price: string; price_atomic: string; active: boolean };

export type JsonRpcMessage = Record<string, unknown>;
export type RequestHeaders = Record<string, string | string[] | undefined>;
export type GatewayRequest = { slug: string; body: JsonRpcMessage | JsonRpcMessage[]; headers: RequestHeaders; requestId: string };

/** What the gateway answers:
 * - `payment_required`: x402's HTTP transport refused (or an unpaid call preferred it): the v2 PaymentRequired and the v1 PaymentRequirementsResponse;
 * - `protocol_refused`: the MCP transport refused the request (headers, protocol version, JSON-RPC shape) with its status and JSON-RPC error;
 * - `mcp`: the MCP transport's answer, and the SettleResponse of a call paid over HTTP. */
export type GatewayAnswer =
  | { kind: 'payment_required'; required: ReturnType<typeof paymentRequiredV2>; v1: ReturnType<typeof paymentRequiredV1> }
  | { kind: 'protocol_refused'; status: number; message: string; jsonrpc: unknown }
  | { kind: 'mcp'; status: number; headers: Record<string, string>; text: string; paymentResponse?: { version: 1 | 2; response: Settled['response'] } };

type Pricing = { call: PricedCall; refusal: (error: string) => Extract<GatewayAnswer, { kind: 'payment_required' }> };
/** The HTTP transport's leg of one request: its payment, and what it answers instead of the MCP exchange. */
type HttpLeg = { overHttp: boolean; payment: Payment | null; answer?: GatewayAnswer | SettlementUnknown; paymentResponse?: { version: 1 | 2; response: Settled['response'] } };
type Gateway = { ports: Ports; cfg: McpConfig; server: ServerRow; priced: Map<string, ToolRow>; network: Network | undefined; ctx: CommandContext; upstream: Upstream };

async function resolveServer(ports: Ports, slug: string) {
  const { rows } = await ports.db.query<ServerRow>(
    `SELECT id, org_id, project_id, slug, name, upstream_url, upstream_auth_header, upstream_auth_ref, environment, payto_address, platform_fee_bps, active FROM mcp_servers WHERE slug = $1`,
    [slug],
  );
  const server = rows[0];
  if (!server || !server.active) throw new Rejection('not_found', 'no such MCP server');
  const tools = (await ports.db.query<ToolRow>(`SELECT tool_name, description, price, price_atomic::text, active FROM mcp_tools WHERE server_id = $1 ORDER BY ordinal`, [server.id])).rows;
  const priced = new Map(tools.filter((t) => t.active).map((t) => [t.tool_name, t]));
  const network: Network | undefined = server.environment === 'live' ? ports.x402?.live : ports.x402?.test;
  return { server, priced, network };
}

/** The one priced tool called in this request, if any (one tools/call per request). */
function pricedToolOf(messages: JsonRpcMessage[], priced: Map<string, ToolRow>) {
  const calls = messages.filter((m) => m.method === 'tools/call');
  if (calls.length > 1) throw new Rejection('invalid_body', 'one tools/call per request', { issues: [{ path: [], code: 'too_many_calls', message: 'one tools/call per request' }] });
  const callParams = calls[0]?.params as { name?: unknown; _meta?: Record<string, unknown> } | undefined;
  const tool = calls.length > 0 && typeof callParams?.name === 'string' ? priced.get(callParams.name) : undefined;
  return { tool, mcpPayment: callParams?._meta?.[META_PAYMENT] };
}

function pricingOf(cfg: McpConfig, server: ServerRow, network: Network | undefined, tool: ToolRow): Pricing {
  if (!network) throw new Rejection('facilitator_unavailable', `no ${server.environment} settlement network is configured`, { retriable: true });
  const reqs = requirementsFor(network, server.payto_address, BigInt(tool.price_atomic));
  const resource = { url: `${cfg.gatewayUrl.replace(/\/+$/, '')}/mcp/${server.slug}`, description: `${server.name}: ${tool.tool_name} (${tool.price} USDC per call)` };
  return {
    call: { server, tool, network, requirements: reqs },
    refusal: (error) => ({ kind: 'payment_required', required: paymentRequiredV2(reqs, resource, error), v1: paymentRequiredV1(network, reqs, resource, error) }),
  };
}

async function upstreamOf(ports: Ports, server: ServerRow): Promise<Upstream> {
  const upstream: Upstream = { url: server.upstream_url, headers: {} };
  if (server.upstream_auth_header && server.upstream_auth_ref) {
    const secret = await ports.vault.get(server.org_id, server.upstream_auth_ref);
    if (secret) upstream.headers[server.upstream_auth_header] = secret.toString('utf8');
  }
  return upstream;
}

async function listTools(g: Gateway) {
  const listed = await listUpstreamToolsFull(g.upstream, g.ports.webhookTargets, g.cfg.timeouts).catch((err: unknown) => {
    throw new Error(err instanceof UpstreamError ? `upstream ${err.code}` : 'upstream unavailable');
  });
  return {
    tools: listed
      .filter((t) => g.priced.has(t.name))
      .map((t) => {
        const p = g.priced.get(t.name)!;
        return { ...t, description: p.description || t.description, _meta: { ...(t._meta as object | undefined), 'x402/price': { price: p.price, price_atomic: p.price_atomic, currency: 'USDC', network: g.network?.name ?? null, pay_to: g.server.payto_address } } };
      }),
  };
}

/** A paid tool call: its payment by either transport, settled once, then the upstream. */
async function callTool(g: Gateway, pricing: Pricing | undefined, leg: HttpLeg, request: CallToolRequest): Promise<CallToolResult> {
  if (!pricing || request.params.name !== pricing.call.tool.tool_name) return { isError: true, content: [{ type: 'text', text: `unknown or inactive tool ${request.params.name}` }] };
  const p = pricing;
  // x402's MCP transport: the PaymentRequired as the tool's (error) result, in structuredContent and as JSON text.
  const mcpRequired = (error: string): CallToolResult => {
    const pr = p.refusal(error).required;
    return { isError: true, structuredContent: pr, content: [{ type: 'text', text: JSON.stringify(pr) }] };
  };
  const refuse = (error: string): CallToolResult => {
    if (!leg.overHttp) return mcpRequired(error);
    leg.answer = p.refusal(error);
    return { isError: true, content: [{ type: 'text', text: error }] };
  };
  let payment = leg.payment;
  if (!leg.overHttp) {
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
    const settlementDeps = { store: g.ports.store, now: g.ports.now, waitFor: (pos: Parameters<Ports['readSide']['waitFor']>[0]) => g.ports.readSide.waitFor(pos, g.ports.readWaitMs) };
    outcome = await settleToolPayment(settlementDeps, g.ctx, p.call, payment);
  } catch (err) {
    if (!(err instanceof SettlementUnknown)) throw err;
    if (leg.overHttp) {
      leg.answer = err;
      return { isError: true, content: [{ type: 'text', text: err.message }] };
    }
    // Not a PaymentRequired (no `accepts`): paying again could pay twice.
    return { isError: true, structuredContent: { x402Version: 2, error: 'settlement_outcome_unknown', transaction: err.txHash }, content: [{ type: 'text', text: `${err.message} (transaction ${err.txHash})` }] };
  }
  if (!outcome.ok) return refuse(outcome.error);
  if (leg.overHttp) leg.paymentResponse = { version: payment.version, response: outcome.settled.response };
  return callUpstream(g, outcome.settled, request);
}

/** The upstream call of a settled payment: a failure (the tool's own or the upstream's) is recorded refundable. */
async function callUpstream(g: Gateway, settled: Settled, request: CallToolRequest): Promise<CallToolResult> {
  const { callId, response } = settled;
  const record = async (c: Parameters<typeof mcpCallDecider.decide>[0]) => {
    const r = await handleCommand(g.ports.store, mcpCallDecider, mcpCallStream(callId), c, g.ctx);
    if (r.lastPosition) await g.ports.readSide.waitFor(r.lastPosition, g.ports.readWaitMs);
  };
  const paidMeta = { call_id: callId, [META_RESPONSE]: response };
  try {
    const r = await callUpstreamTool(g.upstream, g.ports.webhookTargets, g.cfg.timeouts, request.params.name, request.params.arguments);
    if (r.isError === true) {
      // The tool itself reported failure: the payer got nothing it paid for.
      await record({ type: 'upstream_failed', callId, error: 'tool_error' });
      return { ...r, _meta: { ...r._meta, ...paidMeta, 'x402/refundable': true } };
    }
    await record({ type: 'completed', callId, isError: false });
    return { ...r, _meta: { ...r._meta, ...paidMeta } };
  } catch (err) {
    const code = err instanceof UpstreamError ? err.code : 'call_failed';
    await record({ type: 'upstream_failed', callId, error: code });
    return { isError: true, content: [{ type: 'text', text: `the upstream failed (${code}); the payment is recorded as refundable (call ${callId})` }], _meta: { ...paidMeta, 'x402/refundable': true } };
  }
}

/** The MCP exchange itself, through the SDK's server transport (the body handed over parsed; only the headers that say how to speak MCP pass). */
async function exchange(mcp: Server, slug: string, body: GatewayRequest['body'], reqHeaders: RequestHeaders) {
  const { WebStandardStreamableHTTPServerTransport } = await mcpServerSdk();
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  await mcp.connect(transport);
  const headers = new Headers();
  for (const [k, v] of Object.entries(reqHeaders)) if (typeof v === 'string' && (k === 'accept' || k === 'content-type' || k.startsWith('mcp-') || k === 'last-event-id')) headers.set(k, v);
  const webReq = new Request(`http://gateway.internal/mcp/${slug}`, { method: 'POST', headers, body: JSON.stringify(body) });
  const res = await transport.handleRequest(webReq, { parsedBody: body });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** One POST to the gateway: resolve the server and its priced tool, run the MCP exchange (a paid call settled inside it), answer. */
export async function runMcpGateway(ports: Ports, input: GatewayRequest): Promise<GatewayAnswer> {
  const cfg = ports.mcp ?? defaultMcpConfig(ports.baseUrl);
  const { server, priced, network } = await resolveServer(ports, input.slug);
  const ctx: CommandContext = { orgId: server.org_id, projectId: server.project_id, actor: { kind: 'system', id: 'mcp-gateway' }, requestId: input.requestId, now: ports.now };
  const { tool, mcpPayment } = pricedToolOf(Array.isArray(input.body) ? input.body : [input.body], priced);

  let pricing: Pricing | undefined;
  // The HTTP transport: a payment header, or an unpaid call that prefers the 402 (and carries no MCP payment).
  const leg: HttpLeg = { overHttp: false, payment: null };
  if (tool) {
    pricing = pricingOf(cfg, server, network, tool);
    try {
      leg.payment = readPayment(input.headers);
    } catch (err) {
      if (err instanceof X402Refusal) return pricing.refusal(err.code);
      throw err;
    }
    leg.overHttp = leg.payment !== null || (mcpPayment === undefined && prefersHttp402(input.headers.prefer));
  }

  const g: Gateway = { ports, cfg, server, priced, network, ctx, upstream: await upstreamOf(ports, server) };
  const { Server, ListToolsRequestSchema, CallToolRequestSchema } = await mcpServerSdk();
  const mcp = new Server({ name: `gateway:${server.slug}`, version: '1.0.0' }, { capabilities: { tools: {} } });
  mcp.setRequestHandler(ListToolsRequestSchema, () => listTools(g));
  mcp.setRequestHandler(CallToolRequestSchema, (request) => callTool(g, pricing, leg, request));
  try {
    const res = await exchange(mcp, server.slug, input.body, input.headers);
    if (res.status >= 400) {
      let rpc: unknown = null;
      try {
        rpc = JSON.parse(res.text);
      } catch {}
      return { kind: 'protocol_refused', status: res.status, message: ((rpc as { error?: { message?: string } })?.error?.message ?? 'the MCP request was refused').slice(0, 300), jsonrpc: rpc };
    }
    if (leg.answer instanceof SettlementUnknown) throw leg.answer;
    if (leg.answer) return leg.answer;
    const headers: Record<string, string> = {};
    res.headers.forEach((v, k) => {
      if (k !== 'content-length') headers[k] = v;
    });
    return { kind: 'mcp', status: res.status, headers, text: res.text, ...(leg.paymentResponse ? { paymentResponse: leg.paymentResponse } : {}) };
  } finally {
    await mcp.close().catch(() => {});
  }
}
