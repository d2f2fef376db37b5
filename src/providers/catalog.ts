import fs from 'node:fs';
import { z } from 'zod';
import { schemaProblems, type JsonSchema } from './json-schema.ts';

// The provider catalog: versioned data shipped with the service
// (src/providers/catalog.v1.json), validated here with zod when loaded. Routes
// and the tool executor read it through `Catalog`; nothing about a provider is
// hard-coded elsewhere.
//
// An endpoint is a base URL per environment, `null` when the catalog has no
// endpoint row, or `sandbox:` / `sandbox-tls:`: the sandbox provider server on
// loopback (plain HTTP, or HTTPS with client certificates), resolved at run time.

export const AUTH_TYPES = ['api_key', 'path_secret', 'cert', 'hmac_signed', 'jwt_ecdsa', 'two_header', 'oauth', 'cdp', 'none'] as const;
export type AuthType = (typeof AUTH_TYPES)[number];
/** Auth types whose credential is pasted through POST /v1/connections. */
export const KEY_AUTH_TYPES: readonly AuthType[] = ['api_key', 'path_secret', 'cert', 'hmac_signed', 'jwt_ecdsa', 'two_header'];

const Slug = z.string().regex(/^[a-z0-9]+(-[a-z0-9]+)*$/).max(64);
const Endpoint = z.union([z.literal('sandbox:'), z.literal('sandbox-tls:'), z.url({ protocol: /^https?$/ })]).nullable();

const Field = z.object({
  name: z.string().regex(/^[a-z][a-z0-9_]*$/).max(64),
  kind: z.enum(['secret', 'path_secret', 'text', 'certificate', 'private_key']),
  label: z.string().min(1).max(200),
  header_name: z.string().regex(/^[a-z0-9-]+$/).nullable(),
  value_prefix: z.string().max(32).optional(),
});

const Tool = z.object({
  name: z.string().regex(/^[a-z][a-z0-9_]*$/).max(64),
  description: z.string().min(1).max(1000),
  request: z.object({ method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']), path: z.string().startsWith('/').max(500) }),
  input_schema: z.custom<JsonSchema>((s) => schemaProblems(s).length === 0 && (s as JsonSchema).type === 'object', 'a valid JSON Schema (draft-07 or 2020-12) of type object'),
});

export const ProviderDef = z
  .object({
    id: Slug,
    name: z.string().min(1).max(200),
    pkg: z.string().min(1).max(200),
    category: z.string().regex(/^[a-z_]+$/),
    country: z.string().regex(/^[A-Z]{2}$/),
    auth_type: z.enum(AUTH_TYPES),
    description: z.string().max(2000).nullable(),
    status: z.enum(['active', 'beta', 'deprecated']),
    /** `user`: one connection per end user (user_id required); `project`: user_id optional. */
    connection_scope: z.enum(['user', 'project']),
    subaccount_provisionable: z.boolean(),
    engine: z.enum(['none', 'available', 'quarantined']),
    endpoints: z.object({ test: Endpoint, live: Endpoint }),
    /** path_secret: the prefix of every request path, naming the path-secret fields in braces. */
    path_prefix: z.string().startsWith('/').optional(),
    oauth: z.object({ authorize_url: z.url(), token_url: z.url(), scopes: z.array(z.string()) }).optional(),
    fields: z.array(Field).max(8),
    /** How verify-connection probes: `account` reads an account object; `generic` only checks the credential is accepted; null: unsupported. */
    verify: z.object({ probe: z.enum(['account', 'generic']), method: z.enum(['GET', 'POST']), path: z.string().startsWith('/') }).nullable(),
    inbound_webhooks: z.object({ scheme: z.enum(['standard_webhooks']) }).nullable(),
    docs_url: z.url().nullable(),
    homepage: z.url().nullable(),
    logo_url: z.url().nullable(),
    tools: z.array(Tool).max(100),
  })
  .superRefine((p, ctx) => {
    const names = p.fields.map((f) => f.name);
    if (new Set(names).size !== names.length) ctx.addIssue({ code: 'custom', message: 'field names repeat', path: ['fields'] });
    if (new Set(p.tools.map((t) => t.name)).size !== p.tools.length) ctx.addIssue({ code: 'custom', message: 'tool names repeat', path: ['tools'] });
    const need = (ok: boolean, message: string) => ok || ctx.addIssue({ code: 'custom', message, path: ['fields'] });
    switch (p.auth_type) {
      case 'api_key':
        need(p.fields.length === 1 && p.fields[0]!.header_name !== null, 'api_key: one field sent in a header');
        break;
      case 'path_secret': {
        const refs = [...(p.path_prefix ?? '').matchAll(/\{([a-z0-9_]+)\}/g)].map((m) => m[1]);
        need(p.fields.length > 0 && p.fields.every((f) => f.kind === 'path_secret' && refs.includes(f.name)), 'path_secret: every field is a path secret named in path_prefix');
        break;
      }
      case 'cert':
        need(names.join() === 'certificate,private_key', 'cert: fields certificate, private_key');
        break;
      case 'hmac_signed':
        need(names.join() === 'key_id,signing_secret', 'hmac_signed: fields key_id, signing_secret');
        break;
      case 'jwt_ecdsa':
        need(names.join() === 'key_id,private_key', 'jwt_ecdsa: fields key_id, private_key');
        break;
      case 'two_header':
        need(p.fields.length === 2 && p.fields.every((f) => f.header_name !== null), 'two_header: two fields, each in a header');
        break;
      case 'oauth':
        need(p.oauth !== undefined && p.fields.length === 0, 'oauth: an oauth block and no pasted fields');
        break;
      default:
        need(p.fields.length === 0, `${p.auth_type}: no pasted fields`);
    }
  });
export type ProviderDef = z.infer<typeof ProviderDef>;
export type ToolDef = ProviderDef['tools'][number];

const CatalogFile = z.object({ version: z.literal(1), recipes: z.array(Slug), providers: z.array(ProviderDef) });

/** Where the sandbox provider server listens, when it runs. */
export type SandboxUrls = { http: string; https: string };

export class Catalog {
  private readonly byId: Map<string, ProviderDef>;
  constructor(
    readonly providers: readonly ProviderDef[],
    /** Slugs the signup engine knows that have no catalog row (verify answers server_unknown). */
    readonly recipes: ReadonlySet<string> = new Set(),
  ) {
    this.byId = new Map(providers.map((p) => [p.id, p]));
    if (this.byId.size !== providers.length) throw new Error('provider ids repeat in the catalog');
  }

  static parse(json: unknown): Catalog {
    const f = CatalogFile.parse(json);
    return new Catalog(f.providers, new Set(f.recipes));
  }

  private static shipped: Catalog | undefined;

  /** The catalog shipped with the service (read and checked once a process: its tools' schemas compile), or the one in `file`. */
  static load(file?: URL): Catalog {
    if (!file) return (Catalog.shipped ??= Catalog.load(new URL('./catalog.v1.json', import.meta.url)));
    return Catalog.parse(JSON.parse(fs.readFileSync(file, 'utf8')));
  }

  get(id: string): ProviderDef | undefined {
    return this.byId.get(id);
  }

  tool(serverId: string, toolName: string): { provider: ProviderDef; tool: ToolDef } | undefined {
    const provider = this.byId.get(serverId);
    const tool = provider?.tools.find((t) => t.name === toolName);
    return provider && tool ? { provider, tool } : undefined;
  }
}

/** The base URL of a provider in an environment; '' when the catalog has no endpoint row (or the sandbox is not running). */
export function baseUrlOf(p: ProviderDef, environment: 'live' | 'test', sandbox: SandboxUrls | undefined): string {
  const e = p.endpoints[environment];
  if (e === null) return '';
  if (e === 'sandbox:') return sandbox ? `${sandbox.http}/${p.id}` : '';
  if (e === 'sandbox-tls:') return sandbox ? `${sandbox.https}/${p.id}` : '';
  return e;
}
