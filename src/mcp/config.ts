import { defaultUpstreamTimeouts, type UpstreamTimeouts } from '../adapters/mcp/upstream.ts';

// Configuration of monetized MCP servers: where the gateway is reached, the
// upstream timeouts, and the sweep's lock lease. `faults` lets a test stop a
// sweep at a chosen point, as a crashed process would.

export type McpConfig = {
  /** Public base of the gateway (`{gateway_url}/mcp/<slug>`); the service's base URL by default. */
  gatewayUrl: string;
  timeouts: UpstreamTimeouts;
  /** How long a sweep holds its lock before another request may take it over (a crashed holder). */
  sweepLeaseMs: number;
  /** Browser origins besides the service's own that may call the MCP endpoints (MCP_ALLOWED_ORIGINS; src/http/kernel/mcp-browser.ts). */
  allowedOrigins: string[];
  faults?: {
    /** After the lock is taken, before any transfer. */
    afterAcquire?: () => Promise<void>;
    /** After a transfer settled on chain, before its outcome is recorded. */
    afterBroadcast?: (t: { source: string; nonce: string; amount_atomic: string }) => Promise<void>;
  };
};

export const defaultMcpConfig = (baseUrl: string): McpConfig => ({ gatewayUrl: baseUrl, timeouts: defaultUpstreamTimeouts, sweepLeaseMs: 120_000, allowedOrigins: [] });

/** Thrown by a test's fault hook to stand for a process dying at that point: nothing after it runs. */
export class SimulatedCrash extends Error {}
