import { hash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { Queryable } from '../../postgres/db.ts';
import type { ReadCache } from '../../projector/readcache.ts';
import { ApiError, forbidden, insufficientRole, projectResolutionFailed, unauthorized } from './errors.ts';
import { ACCESS_TOKEN_PATTERN, grantOf } from '../../usecases/oauth-tokens.ts';
import { sameHash } from '../../../commands/oauth.ts';
import type { Tenant } from '../../usecases/context.ts';
import type { Ctx } from './route.ts';
import type { KeyUsage } from '../../usecases/key-usage.ts';

// Credentials (spec Part 5). API keys (`Authorization: Bearer sk_<env>_...`)
// resolve to an organization, an environment, a project and scopes. The
// service-auth subtree takes only the platform secret plus the acting user in
// `x-svc-user`. Keys are stored as SHA-256 hashes and compared in constant time.

export type Role = 'owner' | 'admin' | 'member';

export type ApiKeyAuth = {
  kind: 'api_key';
  orgId: string;
  projectId: string;
  /** Whether the key is bound to one project (rather than the whole organization). */
  projectBound: boolean;
  environment: 'live' | 'test';
  keyId: string;
  scopes: string[];
  /** Set when the credential is an OAuth access token issued from this key (scopes then narrowed to the grant). */
  grantId?: string;
};

/** A person acting through the platform credential; `projectId` on calls that act in one project (mode key_or_service). */
export type ServiceAuth = { kind: 'service'; orgId: string; userId: string; role: Role; projectId?: string; /** The project's environment, with projectId. */ environment?: 'live' | 'test' };
export type PlatformAuth = { kind: 'platform' };
export type OpenAuth = { kind: 'open' };
export type Auth = ApiKeyAuth | ServiceAuth | PlatformAuth | OpenAuth;

/**
 * open: no credential. api_key: an API key. platform: the platform secret, no user.
 * service: the platform secret and `x-svc-user`. human_session: like service, but an
 * API key is answered 403 human_session_required first (Part 5 item 8).
 * org_admin: the organization-scoped deprecated family: an organization-wide API
 * key, or the platform secret with an admin or owner in `x-svc-user`; a
 * project-bound key answers 403.
 * key_or_service: an API key, or the platform secret with an acting user in
 * `x-svc-user` (absent: 403 insufficient_role; below minRole: 403).
 */
export type AuthMode = 'open' | 'api_key' | 'platform' | 'service' | 'human_session' | 'org_admin' | 'key_or_service';

export const API_KEY_PATTERN = /^sk_(test|live)_[A-Za-z0-9]{32}$/;
export const hashKey = (key: string) => hash('sha256', key, 'hex');

export const ROLE_RANK: Record<Role, number> = { member: 1, admin: 2, owner: 3 };

/** Scope vocabulary (docs/api.md): `<family>:read`, `<family>:write`, `<family>:*`, `*`. */
export function hasScope(scopes: readonly string[], needed: string): boolean {
  const [family] = needed.split(':');
  return scopes.includes('*') || scopes.includes(needed) || scopes.includes(`${family}:*`) || (needed.endsWith(':read') && scopes.includes(`${family}:write`));
}

function bearer(req: FastifyRequest): string | undefined {
  const h = req.headers.authorization;
  if (typeof h !== 'string') return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
  return m?.[1];
}

const sha256 = (s: string) => hash('sha256', s, 'buffer');

// Which mistake a 401 was, for its WWW-Authenticate (src/http/kernel/errors.ts
// unauthorized): the descriptions name the mistake and what to send instead,
// never the credential.
const SEND_KEY = 'send Authorization: Bearer <API key>';
const WHY = {
  unknownKey: 'the API key is unknown or revoked: check it, or create one with POST /v1/api-keys',
  badToken: 'the access token is unknown, expired or revoked: refresh it or authorize again',
  notAKey: `the bearer token is not an API key (sk_test_ or sk_live_ followed by 32 letters and digits) or an access token: ${SEND_KEY}`,
  platformOnV1: 'the platform secret does not authenticate this route: send an API key (Authorization: Bearer sk_...)',
  keyOnService: 'this route takes the platform secret with the acting user in x-svc-user, not an API key',
  notPlatform: 'the bearer token is not the platform secret, which this route takes (with the acting user in x-svc-user)',
  noUser: 'x-svc-user is missing or not a user id: name the acting user',
  unknownUser: 'x-svc-user names no user: send the id of an existing user',
} as const;

/** Why a request carries no usable bearer: nothing at all, the key in the wrong header, another scheme, no scheme. */
function missingBearer(req: FastifyRequest, send: string): { why: string; none: boolean } {
  const h = req.headers.authorization;
  if (typeof h !== 'string' || h.trim() === '') {
    if (req.headers['x-api-key'] !== undefined) return { why: `the key goes in the Authorization header, not x-api-key: ${send}`, none: false };
    return { why: `no credential: ${send}`, none: true };
  }
  const [first = '', ...rest] = h.trim().split(/\s+/);
  if (/^bearer$/i.test(first)) return { why: `${rest.length === 0 ? 'Authorization: Bearer carries no token' : 'Authorization: Bearer carries one token and nothing else'}: ${send}`, none: false };
  // A scheme is named only when it is a word (a token pasted without a scheme is never echoed).
  if (rest.length > 0 && /^[A-Za-z][A-Za-z-]{0,15}$/.test(first)) return { why: `the ${first} scheme is not accepted: ${send}`, none: false };
  return { why: `Authorization lacks the Bearer scheme: ${send}`, none: false };
}

const SEND_PLATFORM = 'send Authorization: Bearer <platform secret> with the acting user in x-svc-user';
const noBearer = (req: FastifyRequest, resourceMetadata?: string, send = SEND_KEY) => {
  const m = missingBearer(req, send);
  return unauthorized(m.why, { noCredential: m.none, ...(resourceMetadata ? { resourceMetadata } : {}) });
};

type Environment = 'live' | 'test';
type ProjectRef = { id: string; environment: Environment };

type KeyRow = { key_id: string; org_id: string; project_id: string | null; environment: 'live' | 'test'; scopes: string[]; key_hash: string; revoked_at: string | null };

/**
 * The last API key or access token authenticated on a connection: the
 * credential and project header it came with, the credential projections'
 * versions when it was resolved, the (mode, scope) pairs it passed, and an
 * access token's expiry (ms).
 */
type ConnectionAuth = { header: Buffer; project: string | undefined; at: string; auth: ApiKeyAuth; passed: Set<string>; expiresAt: number | undefined };

/** A key's or token's authentication, with the token's expiry (ms). */
type Resolved = { auth: ApiKeyAuth; expiresAt: number | undefined };

const headerValue = (v: string | string[] | undefined): string | undefined => (typeof v === 'string' ? v : undefined);

export class Authenticator {
  /**
   * `cache` follows the organization projection (keys, projects, users, project
   * roles) and `grants` the OAuth projection (access tokens): an entry is used
   * only while its projection has not moved, so a revocation is in force as
   * soon as its command is acknowledged.
   */
  constructor(
    private readonly db: Queryable,
    serviceSecret: string,
    private readonly cache: ReadCache<unknown>,
    private readonly grants: ReadCache<unknown>,
    private readonly opts: { resourceMetadataUrl?: string; now?: () => Date; usage?: KeyUsage } = {},
  ) {
    this.serviceDigest = sha256(serviceSecret);
    this.projections = [cache.projection, grants.projection];
  }

  private now(): Date {
    return (this.opts.now ?? (() => new Date()))();
  }

  /** The platform secret's digest: a presented bearer is hashed once and compared in constant time. */
  private readonly serviceDigest: Buffer;

  /** The projections the credentials are read from: each request's admission reports their applied positions (see learn). */
  readonly projections: readonly string[];

  /**
   * Per connection (keep-alive clients send one credential on many requests):
   * an API key's or access token's authentication is reused for the next
   * request on the same connection with the same Authorization and
   * x-svc-project headers, while neither credential projection (keys,
   * projects; OAuth grants) has moved and, for a token, until it expires; so
   * a revocation or a refresh binds from its acknowledgement, as with the
   * read caches. The headers are compared in constant time. The platform
   * credential is not kept.
   */
  private readonly byConnection = new WeakMap<object, ConnectionAuth>();

  /** The versions of the projections the cached credentials are valid at: it changes when either moves. */
  version(): string {
    return `${this.cache.version() ?? '-'} ${this.grants.version() ?? '-'}`;
  }

  /** The projections' applied positions read from the database by this request's admission (see ReadCache.learn). */
  learn(applied: ReadonlyMap<string, string | null>): void {
    this.cache.learn(applied.get(this.cache.projection) ?? null);
    this.grants.learn(applied.get(this.grants.projection) ?? null);
  }

  /** The authentication already made for this request's connection and headers, if it still holds (no hashing, no lookup). */
  cached(req: FastifyRequest, mode: AuthMode, scope: string | undefined): Auth | undefined {
    const c = this.byConnection.get(req.raw.socket);
    if (c === undefined || c.at !== this.version() || !c.passed.has(`${mode} ${scope ?? ''}`)) return undefined;
    if (c.expiresAt !== undefined && c.expiresAt <= this.now().getTime()) return undefined;
    const header = req.headers.authorization;
    if (typeof header !== 'string' || headerValue(req.headers['x-svc-project']) !== c.project) return undefined;
    const presented = Buffer.from(header);
    if (presented.length !== c.header.length || !timingSafeEqual(presented, c.header)) return undefined;
    this.opts.usage?.seen(c.auth.keyId);
    return c.auth;
  }

  private remember(req: FastifyRequest, mode: AuthMode, scope: string | undefined, at: string, { auth, expiresAt }: Resolved): void {
    const header = req.headers.authorization;
    const socket = req.raw.socket as object | null | undefined;
    // Kept only when the versions it was resolved at are known and still current (the caches keep nothing otherwise either).
    const known = this.cache.version() !== undefined && (auth.grantId === undefined || this.grants.version() !== undefined);
    if (!socket || !known || at !== this.version() || typeof header !== 'string') return;
    const key = `${mode} ${scope ?? ''}`;
    const project = headerValue(req.headers['x-svc-project']);
    const presented = Buffer.from(header);
    const c = this.byConnection.get(socket);
    // The same credential again (another route's mode or scope): one more pair it passed.
    if (c && c.at === at && c.project === project && c.header.length === presented.length && timingSafeEqual(c.header, presented)) {
      c.passed.add(key);
      return;
    }
    Object.freeze(auth.scopes);
    this.byConnection.set(socket, { header: presented, project, at, auth: Object.freeze(auth), passed: new Set([key]), expiresAt });
  }

  /** 401 for a bad bearer: the bare body, plus where to discover the OAuth server (RFC 9728 §5.1) and which mistake it was. */
  private unauthorizedBearer(req: FastifyRequest, why?: string) {
    const resourceMetadata = this.opts.resourceMetadataUrl;
    if (why !== undefined) return unauthorized(why, resourceMetadata ? { resourceMetadata } : {});
    return noBearer(req, resourceMetadata);
  }

  /** An OAuth access token: the key it came from, narrowed to the granted scopes. */
  private async accessToken(req: FastifyRequest, token: string): Promise<{ row: KeyRow; scopes: string[]; grantId: string; expiresAt: number }> {
    const grantId = grantOf('access', token);
    if (!grantId) throw this.unauthorizedBearer(req, WHY.badToken);
    type GrantRow = { key_id: string; status: string; access_token_hash: string | null; access_expires_at: Date | null; token_scopes: string[] | null };
    const g = (await this.grants.get(`grant:${grantId}`, async () => {
      const { rows } = await this.db.query<GrantRow>('SELECT key_id, status, access_token_hash, access_expires_at, token_scopes FROM oauth_grants WHERE grant_id = $1', [grantId]);
      return rows[0] ?? null;
    })) as GrantRow | null;
    const now = this.now();
    if (!g || g.status !== 'active' || !g.access_token_hash || !sameHash(g.access_token_hash, hashKey(token)) || !g.access_expires_at || g.access_expires_at.getTime() <= now.getTime()) throw this.unauthorizedBearer(req, WHY.badToken);
    const row = (await this.cache.get(`key-id:${g.key_id}`, async () => {
      const { rows } = await this.db.query<KeyRow>('SELECT key_id, org_id, project_id, environment, scopes, key_hash, revoked_at::text FROM api_keys WHERE key_id = $1', [g.key_id]);
      return rows[0] ?? null;
    })) as KeyRow | null;
    if (!row || row.revoked_at !== null) throw this.unauthorizedBearer(req, WHY.badToken);
    return { row, scopes: g.token_scopes ?? [], grantId, expiresAt: g.access_expires_at.getTime() };
  }

  private async keyRow(hash: string): Promise<KeyRow | null> {
    return (await this.cache.get(`key:${hash}`, async () => {
      const { rows } = await this.db.query<KeyRow>(
        'SELECT key_id, org_id, project_id, environment, scopes, key_hash, revoked_at::text FROM api_keys WHERE key_hash = $1',
        [hash],
      );
      return rows[0] ?? null;
    })) as KeyRow | null;
  }

  /**
   * A project of the organization with its environment: the named one; else,
   * for `environment`, the default project when it is of that environment and
   * otherwise the first one made in it (test and live are two worlds: a key
   * acts only in projects of its own environment, docs/decisions.md "Issue 60:
   * errors and environments"); without `environment`, the default project.
   */
  private async project(orgId: string, wanted: string | undefined, environment: Environment | undefined): Promise<ProjectRef | null> {
    return (await this.cache.get(`project:${orgId}:${wanted ?? ''}:${wanted ? '' : (environment ?? '')}`, async () => {
      const { rows } = wanted
        ? await this.db.query<ProjectRef>('SELECT id, environment FROM projects WHERE org_id = $1 AND id = $2 AND deleted_at IS NULL', [orgId, wanted])
        : environment
          ? await this.db.query<ProjectRef>('SELECT id, environment FROM projects WHERE org_id = $1 AND environment = $2 AND deleted_at IS NULL ORDER BY is_default DESC, position LIMIT 1', [orgId, environment])
          : await this.db.query<ProjectRef>('SELECT id, environment FROM projects WHERE org_id = $1 AND is_default AND deleted_at IS NULL', [orgId]);
      return rows[0] ?? null;
    })) as ProjectRef | null;
  }

  async authenticate(req: FastifyRequest, mode: AuthMode, scope: string | undefined, minRole: Role | undefined): Promise<Auth> {
    if (mode === 'open') return { kind: 'open' };
    const at = this.version();
    const token = bearer(req);
    const digest = token !== undefined ? sha256(token) : undefined;
    const isService = digest !== undefined && timingSafeEqual(digest, this.serviceDigest);
    if (mode === 'api_key' || (mode === 'org_admin' && !isService)) {
      if (!token) throw this.unauthorizedBearer(req);
      if (isService) throw this.unauthorizedBearer(req, WHY.platformOnV1);
      if (!(API_KEY_PATTERN.test(token) || ACCESS_TOKEN_PATTERN.test(token))) throw this.unauthorizedBearer(req, WHY.notAKey);
      const resolved = await this.apiKey(req, token, scope, digest!);
      if (mode === 'org_admin' && resolved.auth.projectBound) throw forbidden('a project API key cannot act for the whole organization');
      this.remember(req, mode, scope, at, resolved);
      return resolved.auth;
    }
    if (mode === 'key_or_service' && !isService) {
      // An OAuth access token acts as its key here too (docs/decisions.md, OAuth).
      if (!token) throw this.unauthorizedBearer(req);
      if (!(API_KEY_PATTERN.test(token) || ACCESS_TOKEN_PATTERN.test(token))) throw this.unauthorizedBearer(req, WHY.notAKey);
      const resolved = await this.apiKey(req, token, scope, digest!);
      this.remember(req, mode, scope, at, resolved);
      return resolved.auth;
    }
    if (mode === 'key_or_service' && typeof req.headers['x-svc-user'] !== 'string') throw insufficientRole(minRole ?? 'admin');
    if (mode === 'org_admin') minRole ??= 'admin';
    // The service-auth subtree never reads API keys.
    if (mode === 'human_session' && token && !isService && (API_KEY_PATTERN.test(token) || ACCESS_TOKEN_PATTERN.test(token))) {
      throw new ApiError(403, 'human_session_required', 'this operation needs a human session (the platform credential and x-svc-user), not an API key');
    }
    if (!isService) {
      if (!token) throw noBearer(req, undefined, mode === 'platform' ? 'send Authorization: Bearer <platform secret>' : SEND_PLATFORM);
      throw unauthorized(API_KEY_PATTERN.test(token) || ACCESS_TOKEN_PATTERN.test(token) ? WHY.keyOnService : WHY.notPlatform);
    }
    if (mode === 'platform') return { kind: 'platform' };
    const userHeader = req.headers['x-svc-user'];
    const userId = typeof userHeader === 'string' ? userHeader.trim() : '';
    if (!/^[\x21-\x7e]{1,200}$/.test(userId)) throw unauthorized(WHY.noUser);
    const user = (await this.cache.get(`user:${userId}`, async () => {
      const { rows } = await this.db.query<{ org_id: string; role: Role }>('SELECT org_id, role FROM users WHERE user_id = $1', [userId]);
      return rows[0] ?? null;
    })) as { org_id: string; role: Role } | null;
    if (!user) throw unauthorized(WHY.unknownUser);
    const auth: ServiceAuth = { kind: 'service', orgId: user.org_id, userId, role: user.role };
    // A call that acts in one project (x-svc-project, else the default) is resolved
    // here, once, and takes the user's role there: a project-level override raises
    // or narrows it, except for owners (spec Part 5).
    if (mode === 'key_or_service') {
      const header = req.headers['x-svc-project'];
      const wanted = typeof header === 'string' && header.trim() !== '' ? header.trim() : undefined;
      const project = wanted === undefined || /^[\x21-\x7e]{1,200}$/.test(wanted) ? await this.project(auth.orgId, wanted, undefined) : null;
      if (!project) throw wanted ? forbidden('x-svc-project names no project of this organization') : projectResolutionFailed();
      auth.projectId = project.id;
      auth.environment = project.environment;
      auth.role = await this.projectRole(auth, project.id);
    }
    if (minRole && ROLE_RANK[auth.role] < ROLE_RANK[minRole]) throw insufficientRole(minRole);
    return auth;
  }

  private async apiKey(req: FastifyRequest, token: string, scope: string | undefined, digest: Buffer): Promise<Resolved> {
    let row: KeyRow | null;
    let grant: { scopes: string[]; grantId: string; expiresAt: number } | undefined;
    if (ACCESS_TOKEN_PATTERN.test(token)) {
      const t = await this.accessToken(req, token);
      row = t.row;
      grant = t;
    } else {
      const hash = digest.toString('hex');
      row = await this.keyRow(hash);
      if (!row || row.revoked_at !== null || !timingSafeEqual(Buffer.from(row.key_hash, 'hex'), digest)) throw this.unauthorizedBearer(req, WHY.unknownKey);
    }
    if (scope && !hasScope(row.scopes, scope)) throw forbidden(`this API key lacks the scope ${scope}`);
    if (scope && grant && !hasScope(grant.scopes, scope)) throw forbidden(`this access token was not granted the scope ${scope}`);
    const header = req.headers['x-svc-project'];
    const wanted = typeof header === 'string' && header.trim() !== '' ? header.trim() : undefined;
    if (wanted !== undefined && !/^[\x21-\x7e]{1,200}$/.test(wanted)) throw forbidden('x-svc-project names no project of this organization');
    if (row.project_id && wanted && wanted !== row.project_id) throw forbidden('this API key is bound to another project');
    const named = row.project_id ?? wanted;
    const project = await this.project(row.org_id, named, row.environment);
    if (!project) {
      if (named) throw forbidden('x-svc-project names no project of this organization');
      throw forbidden(`this organization has no ${row.environment} project for a ${row.environment} key: create one with POST /v1/projects and "environment": "${row.environment}", then send its id in x-svc-project`);
    }
    // Test and live are two worlds: a key never acts in a project of the other environment.
    if (project.environment !== row.environment) {
      throw forbidden(`${named === row.project_id ? 'this API key is bound to' : 'x-svc-project names'} a ${project.environment} project and this is a ${row.environment} key: a ${row.environment} key acts only in ${row.environment} projects; use a ${project.environment} key for it`);
    }
    const projectId = project.id;
    const scopes = grant ? grant.scopes.filter((x) => hasScope(row.scopes, x)) : row.scopes;
    const auth: ApiKeyAuth = { kind: 'api_key', orgId: row.org_id, projectId, projectBound: row.project_id !== null, environment: row.environment, keyId: row.key_id, scopes, ...(grant ? { grantId: grant.grantId } : {}) };
    this.opts.usage?.seen(row.key_id);
    return { auth, expiresAt: grant?.expiresAt };
  }

  /** Refuses (403 insufficient_role) a person below `min` in a project (their organization role where there is none). */
  async requireRoleIn(auth: ServiceAuth, projectId: string | null, min: Role): Promise<void> {
    const role = projectId ? await this.projectRole(auth, projectId) : auth.role;
    if (ROLE_RANK[role] < ROLE_RANK[min]) throw insufficientRole(min);
  }

  /** A user's effective role in a project: the override unless they own the organization. */
  async projectRole(auth: ServiceAuth, projectId: string): Promise<Role> {
    if (auth.role === 'owner') return 'owner';
    const override = (await this.cache.get(`member:${JSON.stringify([projectId, auth.userId])}`, async () => {
      const { rows } = await this.db.query<{ role: Role }>('SELECT role FROM project_members WHERE project_id = $1 AND user_id = $2 AND NOT removed', [projectId, auth.userId]);
      return rows[0]?.role ?? null;
    })) as Role | null;
    return override ?? auth.role;
  }
}

// The tenant a request serves, from its credential.
/** The organization and project of a key, or of a service call (both resolved by the authenticator: x-svc-project, else the default project). */
export async function tenantOf(ctx: Pick<Ctx<unknown, unknown, unknown, ApiKeyAuth | ServiceAuth>, 'auth'>): Promise<Tenant> {
  const { auth } = ctx;
  if (auth.kind === 'api_key') return { orgId: auth.orgId, projectId: auth.projectId };
  if (!auth.projectId) throw projectResolutionFailed();
  return { orgId: auth.orgId, projectId: auth.projectId };
}
