import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { type AllowedTargets, guardedRequest } from '../outbound-http.ts';
import { mcpClientSdk } from './sdk.ts';

// MCP upstreams (merchants' tool servers), reached as a real MCP client over
// Streamable HTTP with the SDK, every byte through the guarded outbound client
// (no private targets unless allowed, no redirects, capped size and time).

export type UpstreamTimeouts = { connectMs: number; listToolsMs: number; callMs: number };
export const defaultUpstreamTimeouts: UpstreamTimeouts = { connectMs: 5_000, listToolsMs: 10_000, callMs: 30_000 };
const MAX_UPSTREAM_BYTES = 1_048_576;

export type UpstreamErrorCode = 'connect_timeout' | 'connect_failed' | 'list_tools_timeout' | 'list_tools_failed' | 'call_timeout' | 'call_failed';
export class UpstreamError extends Error {
  constructor(
    readonly code: UpstreamErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export type Upstream = { url: string; headers: Record<string, string> };

/** A fetch for the SDK transport that goes through the guarded client; no standalone SSE stream (GET answers 405). */
function guardedFetch(allow: AllowedTargets, timeoutMs: number): typeof fetch {
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const method = init?.method ?? 'GET';
    if (method === 'GET') return new Response(null, { status: 405 });
    const headers: Record<string, string> = {};
    new Headers(init?.headers).forEach((v, k) => (headers[k] = v));
    const res = await guardedRequest(String(input instanceof Request ? input.url : input), allow, {
      method,
      headers,
      body: typeof init?.body === 'string' ? init.body : undefined,
      timeoutMs,
      connectTimeoutMs: timeoutMs,
      maxBodyBytes: MAX_UPSTREAM_BYTES,
    });
    const h = new Headers();
    for (const [k, v] of Object.entries(res.headers)) h.set(k, v);
    return new Response(res.status === 204 || res.status === 202 ? null : res.body, { status: res.status, headers: h });
  }) as typeof fetch;
}

const isTimeout = (err: unknown) => /timed? ?out|timeout/i.test(String((err as Error)?.message ?? err)) || (err as { code?: number })?.code === -32001;

async function connect(u: Upstream, allow: AllowedTargets, t: UpstreamTimeouts, opMs: number): Promise<Client> {
  const { Client, StreamableHTTPClientTransport } = await mcpClientSdk();
  const transport = new StreamableHTTPClientTransport(new URL(u.url), { requestInit: { headers: u.headers }, fetch: guardedFetch(allow, Math.max(t.connectMs, opMs)) });
  const client = new Client({ name: 'agent-ledger-gateway', version: '1.0.0' });
  try {
    await client.connect(transport, { timeout: t.connectMs });
  } catch (err) {
    await client.close().catch(() => {});
    if (isTimeout(err)) throw new UpstreamError('connect_timeout', `the upstream did not complete the MCP handshake within ${t.connectMs} ms`);
    throw new UpstreamError('connect_failed', `the upstream could not be reached: ${(err as Error).message}`.slice(0, 300));
  }
  return client;
}

export async function listUpstreamTools(u: Upstream, allow: AllowedTargets, t: UpstreamTimeouts): Promise<{ name: string; description: string }[]> {
  const client = await connect(u, allow, t, t.listToolsMs);
  try {
    const out: { name: string; description: string }[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 20; page++) {
      const r = await client.listTools(cursor ? { cursor } : {}, { timeout: t.listToolsMs });
      for (const tool of r.tools) out.push({ name: tool.name, description: tool.description ?? '' });
      cursor = r.nextCursor;
      if (!cursor) break;
    }
    return out;
  } catch (err) {
    if (err instanceof UpstreamError) throw err;
    if (isTimeout(err)) throw new UpstreamError('list_tools_timeout', `the upstream did not list its tools within ${t.listToolsMs} ms`);
    throw new UpstreamError('list_tools_failed', `the upstream failed to list its tools: ${(err as Error).message}`.slice(0, 300));
  } finally {
    await client.close().catch(() => {});
  }
}

export type UpstreamTool = { name: string; description?: string; inputSchema: Record<string, unknown>; [k: string]: unknown };

export async function listUpstreamToolsFull(u: Upstream, allow: AllowedTargets, t: UpstreamTimeouts): Promise<UpstreamTool[]> {
  const client = await connect(u, allow, t, t.listToolsMs);
  try {
    return (await client.listTools({}, { timeout: t.listToolsMs })).tools as UpstreamTool[];
  } catch (err) {
    if (err instanceof UpstreamError) throw err;
    if (isTimeout(err)) throw new UpstreamError('list_tools_timeout', `the upstream did not list its tools within ${t.listToolsMs} ms`);
    throw new UpstreamError('list_tools_failed', `the upstream failed to list its tools: ${(err as Error).message}`.slice(0, 300));
  } finally {
    await client.close().catch(() => {});
  }
}

export async function callUpstreamTool(u: Upstream, allow: AllowedTargets, t: UpstreamTimeouts, name: string, args: Record<string, unknown> | undefined): Promise<CallToolResult> {
  const client = await connect(u, allow, t, t.callMs);
  try {
    return (await client.callTool({ name, arguments: args ?? {} }, undefined, { timeout: t.callMs })) as CallToolResult;
  } catch (err) {
    if (err instanceof UpstreamError) throw err;
    if (isTimeout(err)) throw new UpstreamError('call_timeout', `the upstream did not answer within ${t.callMs} ms`);
    throw new UpstreamError('call_failed', `the upstream call failed: ${(err as Error).message}`.slice(0, 300));
  } finally {
    await client.close().catch(() => {});
  }
}
