import type { FastifyRequest } from 'fastify';
import { OAUTH_RATE_BURST, OAUTH_RATE_PER_SECOND } from '../../limits.ts';
import { defaultPasteGuard, type PasteGuardConfig } from '../../usecases/oauth-paste-guard.ts';
import { type RateLimitConfig, SharedRateLimiter } from '../kernel/ratelimit.ts';
import type { Db } from '../../postgres/db.ts';
import type { AppDeps, RouteSpec } from '../kernel/route.ts';

// What the OAuth endpoints share: the issuer and endpoint URLs, the scope
// vocabulary, redirect URI rules, and per-address rate limits.

/** perAddress: token buckets per endpoint; keyPaste: failed API key pastes per address in a window (src/usecases/oauth-paste-guard.ts). */
export type OAuthOptions = { rateLimit?: { perAddress?: RateLimitConfig; keyPaste?: PasteGuardConfig } };

/** What the OAuth route modules (oauth.ts, oauth-consent.ts) share at run time; the composition root makes one and mounts both. */
export type OAuthShared = {
  urls: ReturnType<typeof oauthUrls>;
  /** One set of per-address buckets for the token, registration and consent endpoints. */
  limits: AddressLimits;
  pasteGuard: PasteGuardConfig;
  /** The scope vocabulary, computed once the routes are declared. */
  scopes: () => string[];
};

export function oauthShared(deps: Pick<AppDeps, 'baseUrl' | 'now' | 'routes' | 'db'>, opts: OAuthOptions = {}): OAuthShared {
  let vocabulary: string[] | undefined;
  return {
    urls: oauthUrls(deps.baseUrl),
    limits: AddressLimits.from(deps.db, opts, deps.now),
    pasteGuard: opts.rateLimit?.keyPaste ?? defaultPasteGuard,
    scopes: () => (vocabulary ??= scopeVocabulary(deps.routes)),
  };
}

/** The issuer is the public base URL exactly (RFC 8414 §2); endpoints hang off it without a doubled slash. */
export function oauthUrls(baseUrl: string) {
  const root = baseUrl.replace(/\/+$/, '');
  return {
    issuer: baseUrl,
    authorize: `${root}/oauth/authorize`,
    token: `${root}/oauth/token`,
    register: `${root}/oauth/register`,
    /** RFC 9728 §3.1: the metadata of resource `<base>/v1` sits at `/.well-known/oauth-protected-resource/v1`. */
    resource: `${root}/v1`,
    resourceMetadata: `${root}/.well-known/oauth-protected-resource/v1`,
  };
}

/** The scope vocabulary: every scope a route maps to, each family's `<family>:*`, and `*`. */
export function scopeVocabulary(routes: readonly RouteSpec[]): string[] {
  const scopes = new Set<string>();
  for (const r of routes) {
    if (!r.scope) continue;
    scopes.add(r.scope);
    scopes.add(`${r.scope.split(':')[0]}:*`);
  }
  return ['*', ...[...scopes].sort()];
}

/** Limits per client address and endpoint, counted in PostgreSQL for every instance (key pastes have their own guard: src/usecases/oauth-paste-guard.ts). */
export class AddressLimits {
  constructor(private readonly limiter: SharedRateLimiter) {}

  static from(db: Db, opts: OAuthOptions, now: () => Date): AddressLimits {
    const cfg = opts.rateLimit?.perAddress ?? { burst: OAUTH_RATE_BURST, perSecond: OAUTH_RATE_PER_SECOND };
    return new AddressLimits(new SharedRateLimiter(db, { ...cfg, message: 'too many requests from this address' }, [], () => now().getTime()));
  }

  /** Throws the spec's 429 `rate_limited` body when the address is over its limit on this endpoint. */
  async take(endpoint: 'register' | 'authorize' | 'token', req: FastifyRequest): Promise<void> {
    await this.limiter.take(`${endpoint}:${req.ip}`);
  }
}

/** A single string parameter, or undefined when absent; a repeated or non-string value is `null`. */
export function param(src: unknown, name: string): string | undefined | null {
  if (typeof src !== 'object' || src === null || !Object.hasOwn(src, name)) return undefined;
  const v = (src as Record<string, unknown>)[name];
  return typeof v === 'string' ? v : null;
}
