import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { addressKind } from './address-kind.ts';

export { addressKind };

// The one guarded outbound HTTP client (webhooks, upstream probes). It refuses
// private, loopback, link-local, metadata and reserved addresses (classified
// in ./address-kind.ts from the IANA special-purpose registries) — as literals
// in any form the URL parser accepts (decimal, hex, IPv4 carried in IPv6) and as what a
// name resolves to, checked again at connect time — unless the environment
// allows them (SVC_ALLOW_PRIVATE_TARGETS=loopback,private). It caps time and
// response size and never follows redirects.

export type AllowedTargets = { loopback: boolean; private: boolean };
export const parseAllowedTargets = (raw: string | undefined): AllowedTargets => {
  const set = new Set((raw ?? '').split(',').map((s) => s.trim()).filter(Boolean));
  return { loopback: set.has('loopback'), private: set.has('private') };
};

export class UnsafeTarget extends Error {
  constructor(readonly reason: string) {
    super(`refused target: ${reason}`);
  }
}

function check(ip: string, allow: AllowedTargets): void {
  const kind = addressKind(ip);
  if (kind === 'public') return;
  if (kind === 'loopback' && allow.loopback) return;
  if (kind === 'private' && allow.private) return;
  throw new UnsafeTarget(`${ip} is a ${kind.replace('_', '-')} address`);
}

/** Validates a URL for outbound use: http(s), no credentials, a literal address must be allowed. */
export function checkUrl(raw: string, allow: AllowedTargets): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UnsafeTarget('not an absolute URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new UnsafeTarget('only http and https');
  if (url.username || url.password) throw new UnsafeTarget('credentials in the URL');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (net.isIP(host)) check(host, allow);
  else if (host === 'localhost' || host.endsWith('.localhost')) check('127.0.0.1', allow);
  return url;
}

/** Resolves a name and refuses it when any answer is not allowed. */
export async function checkResolved(hostname: string, allow: AllowedTargets): Promise<void> {
  if (net.isIP(hostname.replace(/^\[|\]$/g, ''))) return;
  const addrs = await new Promise<LookupAddress[]>((resolve, reject) => dnsLookup(hostname, { all: true }, (err, a) => (err ? reject(err) : resolve(a))));
  for (const a of addrs) check(a.address, allow);
}

export type OutboundResponse = { status: number; headers: Record<string, string>; body: string; truncated: boolean };

export type OutboundOptions = {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  timeoutMs?: number;
  connectTimeoutMs?: number;
  maxBodyBytes?: number;
  /** TLS client certificate and trusted CAs (https only; the system roots when `ca` is absent). */
  tls?: { cert?: string; key?: string; ca?: string[] };
  /** The resolver (DNS by default): the port to the outside world a test may stand in for. */
  resolve?: (hostname: string) => Promise<LookupAddress[]>;
};

const systemResolve = (hostname: string) =>
  new Promise<LookupAddress[]>((resolve, reject) => dnsLookup(hostname, { all: true }, (err, a) => (err ? reject(err) : resolve(a))));

export async function guardedRequest(rawUrl: string, allow: AllowedTargets, o: OutboundOptions = {}): Promise<OutboundResponse> {
  const url = checkUrl(rawUrl, allow);
  const maxBody = o.maxBodyBytes ?? 16_384;
  const mod = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.request(
      url,
      {
        method: o.method ?? 'POST',
        headers: o.headers,
        ...(url.protocol === 'https:' && o.tls ? o.tls : {}),
        // Checked again at connect time: a name that resolves to a refused address fails here.
        lookup: (hostname, options, cb) => {
          (o.resolve ?? systemResolve)(hostname).then(
            (list) => {
              try {
                for (const a of list) check(a.address, allow);
              } catch (e) {
                return (cb as (e: Error) => void)(e as Error);
              }
              if (list.length === 0) return (cb as (e: Error) => void)(new Error(`${hostname} resolved to nothing`));
              if ((options as { all?: boolean }).all) (cb as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
              else cb(null, list[0]!.address, list[0]!.family);
            },
            (err: Error) => (cb as (e: Error) => void)(err),
          );
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        let truncated = false;
        res.on('data', (c: Buffer) => {
          if (size < maxBody) chunks.push(c.subarray(0, maxBody - size));
          size += c.length;
          if (size > maxBody) {
            truncated = true;
            res.destroy(); // never read more than we keep
          }
        });
        const done = () => {
          const headers: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
          resolve({ status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks).toString('utf8'), truncated });
        };
        res.on('end', done);
        res.on('close', done);
        res.on('error', () => done());
      },
    );
    const total = setTimeout(() => req.destroy(new Error(`timed out after ${o.timeoutMs ?? 10_000} ms`)), o.timeoutMs ?? 10_000);
    req.on('socket', (sock) => {
      // A socket the agent kept alive is connected already: no connect to guard
      // (a timer there would cut a slow answer short), and nothing left on it.
      if (!sock.connecting) return;
      const connect = setTimeout(() => req.destroy(new Error('connect timeout')), o.connectTimeoutMs ?? 5_000);
      const settled = () => {
        clearTimeout(connect);
        sock.off('connect', settled);
        sock.off('close', settled);
      };
      sock.once('connect', settled);
      sock.once('close', settled);
    });
    req.on('error', (e) => {
      clearTimeout(total);
      reject(e);
    });
    req.on('close', () => clearTimeout(total));
    req.end(o.body);
  });
}
