// The MCP SDK, loaded on first use: the server side for the gateway and the
// session endpoint, the client side for upstreams (~0.15 s of CPU each that a
// process which never speaks MCP does not pay). One promise per side, so
// concurrent first calls share one load.

const load = <T>(f: () => Promise<T>) => {
  let p: Promise<T> | undefined;
  return () => (p ??= f());
};

/** Server, its stateless Streamable HTTP transport and the request schemas. */
export const mcpServerSdk = load(async () => {
  const [{ Server }, { WebStandardStreamableHTTPServerTransport }, { CallToolRequestSchema, ListToolsRequestSchema }] = await Promise.all([
    import('@modelcontextprotocol/sdk/server/index.js'),
    import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'),
    import('@modelcontextprotocol/sdk/types.js'),
  ]);
  return { Server, WebStandardStreamableHTTPServerTransport, CallToolRequestSchema, ListToolsRequestSchema };
});

/** Client and its Streamable HTTP transport. */
export const mcpClientSdk = load(async () => {
  const [{ Client }, { StreamableHTTPClientTransport }] = await Promise.all([import('@modelcontextprotocol/sdk/client/index.js'), import('@modelcontextprotocol/sdk/client/streamableHttp.js')]);
  return { Client, StreamableHTTPClientTransport };
});
