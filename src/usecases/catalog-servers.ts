import { Rejection } from '../eventstore/handler.ts';
import type { ProviderDef } from '../providers/catalog.ts';
import type { Ports } from './context.ts';

// The provider catalog in the words of the product's command-line client
// (issue 58): providers are "servers" (`servers list|show`), their tools are
// "tools" (`tools list|show`). The same rows as GET /v1/providers
// (src/usecases/providers.ts); only the names and the shape differ.

/** The client's status words: our `active` is its `live`. */
const STATUS = { active: 'live', beta: 'beta', deprecated: 'deprecated' } as const;

export type ServerSummary = { id: string; name: string; category: string; region: string; country: string; status: 'live' | 'beta' | 'deprecated'; auth_type: string; tool_count: number; capabilities: string[] };
export type ToolSummary = { name: string; server: string; description: string };
export type ServerDetail = ServerSummary & { description: string | null; docs_url: string | null; homepage: string | null; tools: ToolSummary[] };
export type ToolDetail = ToolSummary & { qualified_name: string; method: string; input_schema: Record<string, unknown> };

function summary(p: ProviderDef): ServerSummary {
  return { id: p.id, name: p.name, category: p.category, region: p.country, country: p.country, status: STATUS[p.status], auth_type: p.auth_type, tool_count: p.tools.length, capabilities: p.tools.map((t) => t.name) };
}
const toolOf = (p: ProviderDef, t: ProviderDef['tools'][number]): ToolSummary => ({ name: t.name, server: p.id, description: t.description });

/** Servers matching a category and a region (a country code), in catalog order. */
export function listServers(ports: Pick<Ports, 'providers'>, f: { category?: string | undefined; region?: string | undefined }): ServerSummary[] {
  return ports.providers.runtime.catalog.providers
    .filter((p) => (!f.category || p.category === f.category.toLowerCase()) && (!f.region || p.country === f.region.toUpperCase()))
    .map(summary);
}

/** One server with its tools, or `not_found`. */
export function showServer(ports: Pick<Ports, 'providers'>, id: string): ServerDetail {
  const p = ports.providers.runtime.catalog.get(id);
  if (!p) throw new Rejection('not_found', `no server ${id} in the catalog; GET /v1/servers lists them`);
  return { ...summary(p), description: p.description, docs_url: p.docs_url, homepage: p.homepage, tools: p.tools.map((t) => toolOf(p, t)) };
}

/** Every tool, or one server's (an unknown server lists none). */
export function listTools(ports: Pick<Ports, 'providers'>, f: { server?: string | undefined }): ToolSummary[] {
  return ports.providers.runtime.catalog.providers.filter((p) => !f.server || p.id === f.server).flatMap((p) => p.tools.map((t) => toolOf(p, t)));
}

/**
 * One tool by its bare name (the server given beside it, else the one server
 * that has it) or by `<server>/<tool>`; `not_found`, or `tool_ambiguous`
 * naming the servers when several have the name and none was given.
 */
export function showTool(ports: Pick<Ports, 'providers'>, name: string, server?: string): ToolDetail {
  const i = name.indexOf('/');
  const [srv, bare] = i > 0 ? [name.slice(0, i), name.slice(i + 1)] : [server, name];
  const hits = ports.providers.runtime.catalog.providers.filter((p) => !srv || p.id === srv).flatMap((p) => p.tools.filter((t) => t.name === bare).map((t) => ({ p, t })));
  if (hits.length === 0) throw new Rejection('not_found', `no tool ${name} in the catalog; GET /v1/tools lists them`);
  if (hits.length > 1) throw new Rejection('tool_ambiguous', `several servers have ${bare}: name one with ?server= or ask for "<server>/${bare}"`, { servers: hits.map((h) => h.p.id) });
  const { p, t } = hits[0]!;
  return { ...toolOf(p, t), qualified_name: `${p.id}/${t.name}`, method: t.request.method, input_schema: t.input_schema as Record<string, unknown> };
}
