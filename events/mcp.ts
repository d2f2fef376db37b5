import { z } from 'zod';
import { IntString, IsoTime } from './common.ts';

// Facts of monetized MCP servers (spec 2 "MCP server", 4.14). Streams:
// `mcp_slug-<slug>` (the global slug claim), `mcp_server-<id>` (the server and
// its tools), `mcp_payto-<org>` (the organization's address seed, by vault
// reference), `mcp_call-<id>` (one paid tool call and its settlement),
// `mcp_sweep-<org>` (the platform-fee sweep: lock, intents, outcomes).

export const McpSlugClaimed = z.object({ slug: z.string(), server_id: z.string(), org_id: z.string(), at: IsoTime });

export const McpTool = z.object({
  id: z.string(),
  tool_name: z.string(),
  description: z.string(),
  pricing_model: z.literal('per_call'),
  price: z.string(),
  price_atomic: IntString,
  active: z.boolean(),
});

export const McpServerCreated = z.object({
  server_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  slug: z.string(),
  name: z.string(),
  description: z.string(),
  overview_md: z.string(),
  category: z.string().nullable(),
  consumer_id: z.string().nullable(),
  upstream_url: z.string(),
  /** The header name and the vault reference of its value; the value itself never enters the log. */
  upstream_auth: z.object({ header: z.string(), vault_ref: z.string() }).nullable(),
  environment: z.enum(['live', 'test']),
  payto_kind: z.enum(['provisioned', 'split']),
  payto_address: z.string(),
  platform_fee_bps: z.number().int().min(0).max(10_000),
  tools: z.array(McpTool),
  at: IsoTime,
});
export const McpServerUpdated = z.object({
  server_id: z.string(),
  changes: z.object({ active: z.boolean().optional(), name: z.string().optional(), description: z.string().optional(), overview_md: z.string().optional(), category: z.string().nullable().optional() }),
  at: IsoTime,
});
export const McpToolUpdated = z.object({
  server_id: z.string(),
  tool_name: z.string(),
  changes: z.object({ active: z.boolean().optional(), description: z.string().optional(), price: z.string().optional(), price_atomic: IntString.optional() }),
  at: IsoTime,
});

export const McpPaytoSeedCreated = z.object({ org_id: z.string(), vault_ref: z.string(), at: IsoTime });

export const McpCallSettled = z.object({
  call_id: z.string(),
  server_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  tool_name: z.string(),
  environment: z.enum(['live', 'test']),
  network: z.enum(['base-sepolia', 'base']),
  payer: z.string(),
  pay_to: z.string(),
  nonce: z.string(),
  price_atomic: IntString,
  platform_fee_bps: z.number().int(),
  /** floor(price_atomic × platform_fee_bps / 10000): rounding favours the merchant. */
  fee_atomic: IntString,
  tx_hash: z.string(),
  x402_version: z.number().int(),
  at: IsoTime,
});
export const McpCallCompleted = z.object({ call_id: z.string(), is_error: z.boolean(), at: IsoTime });
export const McpCallUpstreamFailed = z.object({ call_id: z.string(), error: z.string(), refundable: z.literal(true), at: IsoTime });

export const McpSweepStarted = z.object({ sweep_id: z.string(), holder: z.string(), lease_until: IsoTime, at: IsoTime });
export const McpSweepLeaseTaken = z.object({ sweep_id: z.string(), holder: z.string(), lease_until: IsoTime, at: IsoTime });
export const McpSweepTransferIntended = z.object({
  sweep_id: z.string(),
  server_id: z.string(),
  environment: z.enum(['live', 'test']),
  network: z.enum(['base-sepolia', 'base']),
  source: z.string(),
  destination: z.string(),
  amount_atomic: IntString,
  /** The EIP-3009 nonce: fixed here, so the token itself refuses a second transfer. */
  nonce: z.string(),
  valid_after: IntString,
  valid_before: IntString,
  at: IsoTime,
});
export const McpSweepTransferSettled = z.object({ sweep_id: z.string(), server_id: z.string(), nonce: z.string(), amount_atomic: IntString, tx_hash: z.string().nullable(), reconciled: z.boolean(), at: IsoTime });
export const McpSweepTransferFailed = z.object({ sweep_id: z.string(), server_id: z.string(), nonce: z.string(), amount_atomic: IntString, reason: z.string(), at: IsoTime });
export const McpSweepLeaseReleased = z.object({ sweep_id: z.string(), reason: z.string(), at: IsoTime });
export const McpSweepCompleted = z.object({ sweep_id: z.string(), swept: z.number().int(), total_atomic: IntString, at: IsoTime });

export const mcpEvents = {
  'mcp_slug.claimed': McpSlugClaimed,
  'mcp_server.created': McpServerCreated,
  'mcp_server.updated': McpServerUpdated,
  'mcp_tool.updated': McpToolUpdated,
  'mcp_payto.seed_created': McpPaytoSeedCreated,
  'mcp_call.settled': McpCallSettled,
  'mcp_call.completed': McpCallCompleted,
  'mcp_call.upstream_failed': McpCallUpstreamFailed,
  'mcp_sweep.started': McpSweepStarted,
  'mcp_sweep.lease_taken': McpSweepLeaseTaken,
  'mcp_sweep.transfer_intended': McpSweepTransferIntended,
  'mcp_sweep.transfer_settled': McpSweepTransferSettled,
  'mcp_sweep.transfer_failed': McpSweepTransferFailed,
  'mcp_sweep.lease_released': McpSweepLeaseReleased,
  'mcp_sweep.completed': McpSweepCompleted,
} as const;
