import http from 'node:http';
import net from 'node:net';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

// Real MCP upstreams for tests, built with the SDK's server side on loopback:
// a merchant's tool server, one whose tools/list never answers, and a "dead"
// socket that accepts connections and never says a word.

export type Upstream = { url: string; calls: string[]; authSeen: (string | undefined)[]; failCalls: boolean; close(): Promise<void> };

async function listen(server: http.Server | net.Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as net.AddressInfo).port;
}

export async function startUpstream(kind: 'tools' | 'slow_list' = 'tools'): Promise<Upstream> {
  const state: Upstream = { url: '', calls: [], authSeen: [], failCalls: false, close: async () => {} };
  const build = () => {
    if (kind === 'slow_list') {
      const s = new Server({ name: 'slow', version: '1.0.0' }, { capabilities: { tools: {} } });
      s.setRequestHandler(ListToolsRequestSchema, () => new Promise(() => {}));
      return s;
    }
    const s = new McpServer({ name: 'merchant', version: '1.0.0' });
    s.registerTool('echo', { description: 'Echoes its text', inputSchema: { text: z.string() } }, async ({ text }) => {
      state.calls.push(`echo:${text}`);
      if (state.failCalls) throw new Error('the merchant backend is down');
      return { content: [{ type: 'text', text: `echo: ${text}` }] };
    });
    s.registerTool('forecast', { description: 'Weather for a city', inputSchema: { city: z.string() } }, async ({ city }) => {
      state.calls.push(`forecast:${city}`);
      return { content: [{ type: 'text', text: `sunny in ${city}` }] };
    });
    return s;
  };
  const server = http.createServer(async (req, res) => {
    state.authSeen.push(req.headers['x-merchant-key'] as string | undefined);
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const mcp = build();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    await mcp.connect(transport);
    await transport.handleRequest(req, res, text ? JSON.parse(text) : undefined);
  });
  const port = await listen(server);
  state.url = `http://127.0.0.1:${port}/mcp`;
  state.close = async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  };
  return state;
}

/** Accepts TCP connections and never answers. */
export async function startDeadUpstream(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
  });
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}
