import { rootCertificates } from 'node:tls';
import { guardedRequest, UnsafeTarget, type AllowedTargets } from '../outbound-http.ts';
import type { ProviderDef } from '../../providers/catalog.ts';
import { es256Jwt, hmacRequestSignature } from './signing.ts';

// The one HTTP client of catalog providers, used by verify-connection and by
// tool calls alike. It applies the provider's auth_type to each request (a key
// header, path secrets, a TLS client certificate, an HMAC signature, an ES256
// JWT, two headers, a bearer token, nothing) and goes out through the guarded
// outbound client: private targets refused unless allowed, time and size
// capped, redirects never followed. Failures are typed (ProviderError); a
// message never carries the request URL (path secrets live there) or a secret.

/** A stored credential: one string, or named parts (path secrets, cert + key, key id + secret, ...). */
export type Credential = string | Record<string, string>;

export type ProviderErrorKind = 'rejected' | 'redirect' | 'status' | 'unreachable' | 'timeout' | 'unsupported' | 'endpoint_missing' | 'credential_unusable';

export class ProviderError extends Error {
  constructor(
    readonly kind: ProviderErrorKind,
    message: string,
    readonly extra: { status?: number; detail?: string; location?: string } = {},
  ) {
    super(message);
  }
}

export type ProviderRequest = { method: string; path: string; query?: Record<string, string>; body?: unknown; /** The caller's own headers (a proxy call); the provider's authentication is set over them. */ headers?: Record<string, string> };
export type ProviderResponse = { status: number; json: unknown; latencyMs: number };
/** Any answer of the provider, whatever its status (a proxy call reads them all). */
export type ProviderExchange = { status: number; headers: Record<string, string>; json: unknown; latencyMs: number };

export type HttpProviderOptions = {
  allow: AllowedTargets;
  timeoutMs?: number;
  maxBodyBytes?: number;
  /** Extra trusted CAs (the sandbox's test CA), on top of the system roots. */
  extraCa?: string[];
  /** Origins reached on loopback even when `allow` refuses loopback: the sandbox providers' own servers, exactly. */
  sandboxOrigins?: string[];
  now?: () => Date;
};

const field = (cred: Credential | undefined, name: string): string => {
  if (typeof cred === 'object' && typeof cred[name] === 'string') return cred[name];
  throw new ProviderError('credential_unusable', `the stored credential has no ${name}`);
};

/** Provider words from an error body: its message/error/detail member, else a bounded prefix of the text. */
function providerWords(body: string): string {
  try {
    const j = JSON.parse(body) as Record<string, unknown>;
    for (const k of ['message', 'error_description', 'detail', 'error']) if (typeof j[k] === 'string') return (j[k] as string).slice(0, 500);
  } catch {
    // not JSON
  }
  return body.slice(0, 500);
}

export class HttpProvider {
  private readonly ca: string[] | undefined;
  constructor(private readonly o: HttpProviderOptions) {
    this.ca = o.extraCa?.length ? [...rootCertificates, ...o.extraCa] : undefined;
  }

  /** Sends one request with the provider's authentication; resolves on 2xx, throws ProviderError otherwise. */
  async request(p: ProviderDef, baseUrl: string, cred: Credential | undefined, r: ProviderRequest): Promise<ProviderResponse> {
    const res = await this.exchange(p, baseUrl, cred, r);
    if (res.status >= 300 && res.status < 400) throw new ProviderError('redirect', `${p.id} answered a redirect (${res.status}), which is not followed`, { status: res.status, ...(res.headers.location ? { location: res.headers.location.slice(0, 500) } : {}) });
    if (res.status === 401 || res.status === 403) throw new ProviderError('rejected', `${p.id} rejected the credential (${res.status})`, { status: res.status, detail: providerWords(res.text) });
    if (res.status < 200 || res.status >= 300) throw new ProviderError('status', `${p.id} answered ${res.status}`, { status: res.status, detail: providerWords(res.text) });
    return { status: res.status, json: res.json, latencyMs: res.latencyMs };
  }

  /** Sends one request with the provider's authentication and resolves with whatever it answered; throws ProviderError only when it was not reached. */
  async exchange(p: ProviderDef, baseUrl: string, cred: Credential | undefined, r: ProviderRequest): Promise<ProviderExchange & { text: string }> {
    if (p.auth_type === 'cdp') throw new ProviderError('unsupported', `${p.id} (cdp) is reached through the platform's engine, not over HTTP`);
    if (!baseUrl) throw new ProviderError('endpoint_missing', `the catalog has no endpoint for ${p.id} in this environment`);
    const base = new URL(baseUrl);
    let path = r.path;
    if (p.auth_type === 'path_secret') {
      const prefix = (p.path_prefix ?? '').replace(/\{([a-z0-9_]+)\}/g, (_m, n: string) => encodeURIComponent(field(cred, n)));
      path = prefix + path;
    }
    const qs = r.query && Object.keys(r.query).length ? `?${new URLSearchParams(r.query)}` : '';
    const pathWithQuery = `${base.pathname.replace(/\/$/, '')}${path}${qs}`;
    const url = `${base.origin}${pathWithQuery}`;
    const body = r.body === undefined ? '' : JSON.stringify(r.body);
    const headers: Record<string, string> = { accept: 'application/json', ...r.headers, 'user-agent': 'agent-ledger-providers/1' };
    if (body) headers['content-type'] = 'application/json';
    let tls: { cert: string; key: string } | undefined;
    const now = this.o.now?.() ?? new Date();
    switch (p.auth_type) {
      case 'api_key':
      case 'two_header':
        for (const f of p.fields) headers[f.header_name!] = `${f.value_prefix ?? ''}${typeof cred === 'string' ? cred : field(cred, f.name)}`;
        break;
      case 'cert':
        tls = { cert: field(cred, 'certificate'), key: field(cred, 'private_key') };
        break;
      case 'hmac_signed': {
        const ts = String(Math.floor(now.getTime() / 1000));
        headers[p.fields[0]!.header_name ?? 'x-key-id'] = field(cred, 'key_id');
        headers[`x-${p.id}-timestamp`] = ts;
        headers[`x-${p.id}-signature`] = hmacRequestSignature(field(cred, 'signing_secret'), ts, r.method, pathWithQuery, body);
        break;
      }
      case 'jwt_ecdsa':
        try {
          headers.authorization = `Bearer ${es256Jwt(field(cred, 'key_id'), field(cred, 'private_key'), p.id, now)}`;
        } catch (err) {
          if (err instanceof ProviderError) throw err;
          throw new ProviderError('credential_unusable', 'the stored private key cannot sign an ES256 token');
        }
        break;
      case 'oauth':
        headers.authorization = `Bearer ${field(cred, 'access_token')}`;
        break;
      case 'none':
        break;
    }
    const started = process.hrtime.bigint();
    let res;
    try {
      const allow = this.o.sandboxOrigins?.includes(base.origin) ? { ...this.o.allow, loopback: true } : this.o.allow;
      res = await guardedRequest(url, allow, {
        method: r.method,
        headers,
        body: body || undefined,
        timeoutMs: this.o.timeoutMs ?? 10_000,
        maxBodyBytes: this.o.maxBodyBytes ?? 262_144,
        ...(tls || this.ca ? { tls: { ...tls, ...(this.ca ? { ca: this.ca } : {}) } } : {}),
      });
    } catch (err) {
      const e = err as Error & { code?: string };
      if (err instanceof UnsafeTarget) throw new ProviderError('unreachable', `${p.id} is not reachable from here: ${err.reason}`);
      const timeout = /timed out|timeout/i.test(e.message);
      // The message names the host only: the path may carry secrets.
      throw new ProviderError(timeout ? 'timeout' : 'unreachable', `${p.id} at ${base.host} ${timeout ? 'did not answer in time' : `could not be reached (${e.code ?? 'transport error'})`}`);
    }
    const latencyMs = Number((process.hrtime.bigint() - started) / 1_000_000n);
    let json: unknown = null;
    try {
      json = res.body ? JSON.parse(res.body) : null;
    } catch {
      json = res.body;
    }
    return { status: res.status, headers: res.headers, json, latencyMs, text: res.body };
  }

  /** A form POST to a provider's OAuth token endpoint (guarded like every provider call); the JSON answer, whatever its status. */
  async postForm(url: string, form: Record<string, string>): Promise<{ status: number; json: Record<string, unknown> }> {
    const origin = new URL(url).origin;
    const allow = this.o.sandboxOrigins?.includes(origin) ? { ...this.o.allow, loopback: true } : this.o.allow;
    let res;
    try {
      res = await guardedRequest(url, allow, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json', 'user-agent': 'agent-ledger-providers/1' },
        body: new URLSearchParams(form).toString(),
        timeoutMs: this.o.timeoutMs ?? 10_000,
        maxBodyBytes: this.o.maxBodyBytes ?? 262_144,
        ...(this.ca ? { tls: { ca: this.ca } } : {}),
      });
    } catch (err) {
      if (err instanceof UnsafeTarget) throw new ProviderError('unreachable', `the token endpoint at ${new URL(url).host} is not reachable from here: ${err.reason}`);
      throw new ProviderError('unreachable', `the token endpoint at ${new URL(url).host} could not be reached`);
    }
    let json: Record<string, unknown> = {};
    try {
      const j = JSON.parse(res.body) as unknown;
      if (j && typeof j === 'object' && !Array.isArray(j)) json = j as Record<string, unknown>;
    } catch {
      // not JSON
    }
    return { status: res.status, json };
  }
}
