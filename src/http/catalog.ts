import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { listServers, listTools, showServer, showTool } from '../usecases/catalog-servers.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';

// The provider catalog as servers and tools (issue 58: the product's
// command-line client's `servers list|show` and `tools list|show`). The same
// facts as GET /v1/providers; the use cases: src/usecases/catalog-servers.ts.

const ServerSummary = z
  .object({
    id: z.string(),
    name: z.string(),
    category: z.string(),
    region: z.string().meta({ description: 'ISO 3166 country code' }),
    country: z.string(),
    status: z.enum(['live', 'beta', 'deprecated']).meta({ description: 'live is the catalog status active' }),
    auth_type: z.string(),
    tool_count: z.number().int(),
    capabilities: z.array(z.string()).meta({ description: "The server's tool names" }),
  })
  .meta({ id: 'ServerSummary' });
const ToolSummary = z.object({ name: z.string(), server: z.string(), description: z.string() }).meta({ id: 'ToolSummary' });

const Slug = z.string().min(1).max(64);
const CatalogErrors = [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']] as const;

export async function catalogRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/servers',
    operationId: 'listServers',
    summary: 'The catalog as servers (the providers of GET /v1/providers), filtered by category and region',
    tags: ['providers'],
    auth: 'api_key',
    scope: 'providers:read',
    query: z.object({ category: z.string().min(1).max(64).optional(), region: z.string().min(2).max(2).optional() }),
    responses: { 200: z.object({ data: z.array(ServerSummary), total: z.number().int() }) },
    errors: CatalogErrors,
    async handler({ query, deps }) {
      const data = listServers(deps, query);
      return { status: 200, body: { data, total: data.length } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/servers/:id',
    operationId: 'getServer',
    summary: 'One server of the catalog with its tools',
    tags: ['providers'],
    auth: 'api_key',
    scope: 'providers:read',
    params: z.object({ id: Slug }),
    responses: {
      200: ServerSummary.extend({ description: z.string().nullable(), docs_url: z.string().nullable(), homepage: z.string().nullable(), tools: z.array(ToolSummary).describe('The tools of this server.') }).meta({ id: 'ServerDetail' }),
    },
    errors: [...CatalogErrors, [404, 'not_found']],
    async handler({ params, deps }) {
      return { status: 200, body: showServer(deps, params.id) };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/tools',
    operationId: 'listTools',
    summary: "Every tool of the catalog, or one server's",
    tags: ['providers'],
    auth: 'api_key',
    scope: 'providers:read',
    query: z.object({ server: Slug.optional() }),
    responses: { 200: z.object({ data: z.array(ToolSummary), total: z.number().int() }) },
    errors: CatalogErrors,
    async handler({ query, deps }) {
      const data = listTools(deps, query);
      return { status: 200, body: { data, total: data.length } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/tools/:name',
    operationId: 'getTool',
    summary: 'One tool with its input schema: a bare name (server given in ?server=, else the one server that has it) or "<server>/<tool>"',
    tags: ['providers'],
    auth: 'api_key',
    scope: 'providers:read',
    params: z.object({ name: z.string().min(1).max(200) }),
    query: z.object({ server: Slug.optional() }),
    responses: {
      200: ToolSummary.extend({ qualified_name: z.string(), method: z.string().describe('The HTTP method the tool calls the provider with.'), input_schema: z.record(z.string(), z.unknown()) }).meta({ id: 'ToolDetail' }),
    },
    errors: [...CatalogErrors, [404, 'not_found'], [409, 'tool_ambiguous']],
    async handler({ params, query, deps }) {
      return { status: 200, body: showTool(deps, params.name, query.server) };
    },
  });
}
