import type { AuthenticationResponseJSON, AuthenticatorTransport, RegistrationResponseJSON } from '@simplewebauthn/server';

// WebAuthn (passkeys) through @simplewebauthn/server, the one file that
// imports it. The relying party is this service: its id is the host of
// PUBLIC_BASE_URL, and a response must come from that origin (or, the same
// host on another port, the address a request was made to: a service behind
// no proxy in development). The library is loaded on first use (~0.3 s of CPU
// that a process which never meets a passkey does not pay), outside the
// try blocks, so a failure to load it is not read as a refused credential.

let loaded: Promise<typeof import('@simplewebauthn/server')> | undefined;
const webauthn = () => (loaded ??= import('@simplewebauthn/server'));

export type RelyingParty = { id: string; name: string; origins: string[] };
export type StoredPasskey = { credentialId: string; publicKey: string; counter: number; transports: string[] };

export function relyingParty(baseUrl: string, requestOrigin?: string): RelyingParty {
  const u = new URL(baseUrl);
  const origins = [u.origin];
  if (requestOrigin) {
    try {
      const r = new URL(requestOrigin);
      if (r.hostname === u.hostname && r.protocol === u.protocol && r.origin !== u.origin) origins.push(r.origin);
    } catch {
      // not an origin: only the public one
    }
  }
  return { id: u.hostname, name: 'Agent Ledger', origins };
}

export async function registrationOptions(rp: RelyingParty, user: { id: string; email: string }, existing: StoredPasskey[]) {
  const { generateRegistrationOptions } = await webauthn();
  return generateRegistrationOptions({
    rpName: rp.name,
    rpID: rp.id,
    userName: user.email,
    userID: new TextEncoder().encode(user.id),
    attestationType: 'none',
    excludeCredentials: existing.map((p) => ({ id: p.credentialId, transports: p.transports as AuthenticatorTransport[] })),
    authenticatorSelection: { residentKey: 'required', userVerification: 'preferred' },
  });
}

export async function verifyRegistration(rp: RelyingParty, response: unknown, challenge: string): Promise<StoredPasskey | null> {
  const { verifyRegistrationResponse } = await webauthn();
  try {
    const r = await verifyRegistrationResponse({ response: response as RegistrationResponseJSON, expectedChallenge: challenge, expectedOrigin: rp.origins, expectedRPID: rp.id, requireUserVerification: false });
    if (!r.verified) return null;
    const c = r.registrationInfo.credential;
    return { credentialId: c.id, publicKey: Buffer.from(c.publicKey).toString('base64url'), counter: c.counter, transports: c.transports ?? [] };
  } catch {
    return null;
  }
}

export async function authenticationOptions(rp: RelyingParty) {
  const { generateAuthenticationOptions } = await webauthn();
  return generateAuthenticationOptions({ rpID: rp.id, userVerification: 'preferred', allowCredentials: [] });
}

/** The user id a discoverable credential's response names (the userHandle set at registration), if well formed. */
export function userHandleOf(response: unknown): { userId: string; credentialId: string } | null {
  const r = response as Partial<AuthenticationResponseJSON> | null;
  if (!r || typeof r.id !== 'string' || typeof r.response?.userHandle !== 'string') return null;
  const userId = Buffer.from(r.response.userHandle, 'base64url').toString('utf8');
  return /^usr_[A-Za-z0-9]{16}$/.test(userId) ? { userId, credentialId: r.id } : null;
}

export async function verifyAuthentication(rp: RelyingParty, response: unknown, challenge: string, p: StoredPasskey): Promise<boolean> {
  const { verifyAuthenticationResponse } = await webauthn();
  try {
    const r = await verifyAuthenticationResponse({
      response: response as AuthenticationResponseJSON,
      expectedChallenge: challenge,
      expectedOrigin: rp.origins,
      expectedRPID: rp.id,
      credential: { id: p.credentialId, publicKey: new Uint8Array(Buffer.from(p.publicKey, 'base64url')), counter: p.counter, transports: p.transports as AuthenticatorTransport[] },
      requireUserVerification: false,
    });
    return r.verified;
  } catch {
    return false;
  }
}
