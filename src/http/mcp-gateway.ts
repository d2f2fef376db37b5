import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { runMcpGateway } from '../usecases/mcp-gateway.ts';
import { b64json } from '../x402/payment.ts';
import { ApiError } from './kernel/errors.ts';
import { MCP_ORIGIN_ERRORS, mcpOriginHook, mcpPreflight } from './kernel/mcp-browser.ts';
import { defineRoute, type AppDeps, type Reply } from './kernel/route.ts';

// The paying gateway `/mcp/<slug>`: the declarations. The gateway itself (the
// server and its priced tool, the MCP exchange, the paid call settled through
// src/mcp/settle.ts, the upstream) is src/usecases/mcp-gateway.ts; here its
// answer becomes HTTP: x402's HTTP transport answers a refusal (or an unpaid
// call sent with `Prefer: x402=http`) with 402 and `PAYMENT-REQUIRED`, and a
// call paid over HTTP carries `PAYMENT-RESPONSE` (v2) or `X-PAYMENT-RESPONSE` (v1).

const Slug = z.object({ slug: z.string().min(1).max(64) });

/** The 402 body of the HTTP transport: x402 v1's PaymentRequirementsResponse (v2's PaymentRequired is the PAYMENT-REQUIRED header). */
const PaymentRequiredV1 = z
  .object({
    x402Version: z.literal(1).describe('The x402 protocol version of this body: 1.'),
    error: z.string(),
    accepts: z.array(
      z.object({
        scheme: z.literal('exact'),
        network: z.string(),
        maxAmountRequired: z.string().describe('The price of the call in the asset\'s atomic units (USDC: 6 decimals), as a decimal string.'),
        resource: z.string(),
        description: z.string(),
        mimeType: z.string().describe('The media type of the paid answer.'),
        payTo: z.string().describe('The address to pay (the server\'s provisioned wallet).'),
        maxTimeoutSeconds: z.number().int().describe('How long, in seconds, a payment authorization for this call stays acceptable.'),
        asset: z.string(),
        extra: z.object({ name: z.string(), version: z.string().describe("The EIP-712 domain version of the token contract.") }).describe("The token's EIP-712 domain (its name and version), to sign the authorization."),
      }).describe('One way to pay for the call.'),
    ).describe('The ways to pay that are accepted (x402 `exact` on the network of the credential).'),
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
  // Origin and Host checked before anything runs (DNS rebinding), CORS for the allowed origins: src/http/kernel/mcp-browser.ts.
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
      const answer = await runMcpGateway(deps, { slug: params.slug, body, headers: req.headers, requestId: String(req.id) });
      if (answer.kind === 'payment_required') return { status: 402, headers: { 'payment-required': b64json(answer.required) }, body: answer.v1 };
      if (answer.kind === 'protocol_refused') throw new ApiError(answer.status, 'mcp_protocol_error', answer.message, { jsonrpc: answer.jsonrpc });
      const paid = answer.paymentResponse;
      const payHeaders: Record<string, string> = !paid ? {} : paid.version === 2 ? { 'payment-response': b64json(paid.response) } : { 'x-payment-response': b64json(paid.response) };
      return { status: answer.status, headers: { ...payHeaders, ...answer.headers }, body: answer.text === '' ? undefined : answer.text };
    },
  });
}
