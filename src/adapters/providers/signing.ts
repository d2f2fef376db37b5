import { createHmac, createPrivateKey, createPublicKey, sign, timingSafeEqual, verify } from 'node:crypto';

// The request-signing schemes of provider auth types, shared by the HTTP
// provider adapter (which signs) and the sandbox provider server (which checks).

/** hmac_signed: hex HMAC-SHA256 over "<unix seconds>\n<METHOD>\n<path with query>\n<body>". */
export function hmacRequestSignature(secret: string, timestamp: string, method: string, pathWithQuery: string, body: string): string {
  return createHmac('sha256', secret).update(`${timestamp}\n${method.toUpperCase()}\n${pathWithQuery}\n${body}`).digest('hex');
}

export function sameHex(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
}

const b64u = (v: Buffer | string) => Buffer.from(v).toString('base64url');

/** jwt_ecdsa: a compact ES256 JWT (header kid = key id; iss = key id; aud; 5 minutes). */
export function es256Jwt(keyId: string, privateKeyPem: string, audience: string, now: Date): string {
  const iat = Math.floor(now.getTime() / 1000);
  const input = `${b64u(JSON.stringify({ alg: 'ES256', typ: 'JWT', kid: keyId }))}.${b64u(JSON.stringify({ iss: keyId, aud: audience, iat, exp: iat + 300 }))}`;
  const sig = sign('sha256', Buffer.from(input), { key: createPrivateKey(privateKeyPem), dsaEncoding: 'ieee-p1363' });
  return `${input}.${b64u(sig)}`;
}

/** Verifies an ES256 JWT against a public key; returns its claims or a reason. */
export function verifyEs256Jwt(token: string, publicKeyPem: string, audience: string, now: Date): { ok: true; claims: Record<string, unknown> } | { ok: false; reason: string } {
  const parts = token.split('.');
  if (parts.length !== 3) return { ok: false, reason: 'malformed token' };
  let header: Record<string, unknown>;
  let claims: Record<string, unknown>;
  try {
    header = JSON.parse(Buffer.from(parts[0]!, 'base64url').toString('utf8'));
    claims = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8'));
  } catch {
    return { ok: false, reason: 'malformed token' };
  }
  if (header.alg !== 'ES256') return { ok: false, reason: 'alg must be ES256' };
  const good = verify('sha256', Buffer.from(`${parts[0]}.${parts[1]}`), { key: createPublicKey(publicKeyPem), dsaEncoding: 'ieee-p1363' }, Buffer.from(parts[2]!, 'base64url'));
  if (!good) return { ok: false, reason: 'bad signature' };
  const t = Math.floor(now.getTime() / 1000);
  if (claims.aud !== audience) return { ok: false, reason: 'wrong audience' };
  if (typeof claims.exp !== 'number' || claims.exp < t || typeof claims.iat !== 'number' || claims.iat > t + 60) return { ok: false, reason: 'token expired or not yet valid' };
  return { ok: true, claims };
}
