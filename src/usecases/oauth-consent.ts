import { timingSafeEqual } from 'node:crypto';
import { oauthGrantDecider, oauthGrantStream, scopeHeld, sha256Hex } from '../../commands/oauth.ts';
import { handleCommand, Rejection } from '../eventstore/handler.ts';
import { randomString } from '../ids.ts';
import { OAUTH_CODE_TTL_MS, OAUTH_CONSENT_TTL_MS } from '../limits.ts';
import type { Db, Queryable } from '../postgres/db.ts';
import type { Ports } from './context.ts';
import { mintSecret, newGrantId } from './oauth-tokens.ts';
import type { PasteAttempt, PasteGuard } from './oauth-paste-guard.ts';
import { createMissingIndex, migrate } from '../postgres/schema.ts';

// The consent behind GET and POST /oauth/authorize (spec Part 4.1): the checked
// authorization request is stored server side under a one-time handle that the
// form carries, bound to a cookie (both stored as SHA-256 hashes); the form's
// answer takes the handle once, checks the pasted API key (failed pastes
// counted by the paste guard) and records the grant with its single-use code.
// The pending request is an operational record, not a fact; the grant it leads
// to is an event. Every refusal is `consent_refused` with the sentence the
// page shows.

export const CONSENT_REFUSED = 'consent_refused';
const refused = (detail: string) => new Rejection(CONSENT_REFUSED, detail);

export async function migrateConsent(db: Db): Promise<void> {
  await migrate(db, async (tx) => {
    await tx.query(`CREATE TABLE IF NOT EXISTS oauth_consent_requests (
    handle_hash text PRIMARY KEY,
    cookie_hash text NOT NULL,
    client_id text NOT NULL,
    redirect_uri text NOT NULL,
    code_challenge text NOT NULL,
    scopes jsonb,
    state text,
    expires_at timestamptz NOT NULL,
    used_at timestamptz
  )`);
    await createMissingIndex(tx, 'oauth_consent_requests_expires', 'CREATE INDEX IF NOT EXISTS oauth_consent_requests_expires ON oauth_consent_requests (expires_at)');
  });
}

function sameHex(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
}

/** A checked authorization request (client, redirect URI, PKCE challenge, scopes asked or null for the key's, state). */
export type ConsentRequest = { clientId: string; redirectUri: string; challenge: string; scopes: string[] | null; state: string | undefined };

export type PendingConsent = { cookie_hash: string; client_id: string; redirect_uri: string; code_challenge: string; scopes: string[] | null; state: string | null; used_at: Date | null };

/** Stores a checked request under a new handle bound to the cookie (expired requests and paste counts swept first); the handle. */
export async function openConsent(db: Queryable, guard: PasteGuard, now: Date, cookie: string, r: ConsentRequest): Promise<string> {
  const handle = randomString(43);
  await db.query('DELETE FROM oauth_consent_requests WHERE expires_at < $1', [new Date(now.getTime() - OAUTH_CONSENT_TTL_MS).toISOString()]);
  await guard.sweep(now);
  await db.query(
    `INSERT INTO oauth_consent_requests (handle_hash, cookie_hash, client_id, redirect_uri, code_challenge, scopes, state, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [sha256Hex(handle), sha256Hex(cookie), r.clientId, r.redirectUri, r.challenge, r.scopes ? JSON.stringify(r.scopes) : null, r.state ?? null, new Date(now.getTime() + OAUTH_CONSENT_TTL_MS).toISOString()],
  );
  return handle;
}

/**
 * Takes the form's handle once: the pending request, unexpired, unused and
 * bound to this cookie. An allow first reserves a paste attempt against the
 * address's failures (all instances share the count; a valid key gives it back).
 */
export async function takeConsent(db: Queryable, guard: PasteGuard, f: { handle: string; cookie: string | undefined; allow: boolean; address: string; now: Date }): Promise<{ pending: PendingConsent; attempt: PasteAttempt | undefined }> {
  const { rows } = await db.query<PendingConsent>(
    'SELECT cookie_hash, client_id, redirect_uri, code_challenge, scopes, state, used_at FROM oauth_consent_requests WHERE handle_hash = $1 AND expires_at > $2',
    [sha256Hex(f.handle), f.now.toISOString()],
  );
  const pending = rows[0];
  if (!pending) throw refused('This consent form is unknown or has expired.');
  if (!f.cookie || !sameHex(sha256Hex(f.cookie), pending.cookie_hash)) throw refused('The consent cookie is missing or does not match this form. Open the consent page again from the application.');
  if (pending.used_at !== null) throw refused('This consent form was already used.');
  const attempt = f.allow ? await guard.reserve(f.address, f.now) : undefined;
  // One use: whoever flips used_at first owns the handle.
  const consumed = await db.query('UPDATE oauth_consent_requests SET used_at = $2 WHERE handle_hash = $1 AND used_at IS NULL', [sha256Hex(f.handle), f.now.toISOString()]);
  if (consumed.rowCount !== 1) throw refused('This consent form was already used.');
  return { pending, attempt };
}

type PastedKey = { key_id: string; org_id: string; project_id: string | null; environment: 'live' | 'test'; scopes: string[]; key_hash: string; revoked_at: Date | null };

/** The grant of an allowed consent, for the pasted API key (by its hash): its single-use code. */
export async function grantConsent(
  ports: Pick<Ports, 'db' | 'store' | 'readSide' | 'readWaitMs'>,
  guard: PasteGuard,
  c: { pending: PendingConsent; attempt: PasteAttempt; keyHash: string; requestId: string; now: Date },
): Promise<string> {
  const { pending, keyHash, now } = c;
  const keys = await ports.db.query<PastedKey>('SELECT key_id, org_id, project_id, environment, scopes, key_hash, revoked_at FROM api_keys WHERE key_hash = $1', [keyHash]);
  const k = keys.rows[0];
  if (!k || k.revoked_at !== null || !sameHex(k.key_hash, keyHash)) throw refused('The API key is not valid.');
  await guard.giveBack(c.attempt);
  const scopes = pending.scopes ?? k.scopes;
  const wider = scopes.filter((s) => !scopeHeld(k.scopes, s));
  if (wider.length > 0) throw refused(`The application asks for more than this API key holds: ${wider.join(' ')}.`);

  const grantId = newGrantId();
  const code = mintSecret('code', grantId);
  const result = await handleCommand(
    ports.store,
    oauthGrantDecider,
    oauthGrantStream(grantId),
    {
      type: 'create',
      grantId,
      clientId: pending.client_id,
      orgId: k.org_id,
      keyId: k.key_id,
      projectId: k.project_id,
      environment: k.environment,
      scopes,
      redirectUri: pending.redirect_uri,
      codeChallenge: pending.code_challenge,
      codeHash: sha256Hex(code),
      codeExpiresAt: new Date(now.getTime() + OAUTH_CODE_TTL_MS).toISOString(),
    },
    { orgId: k.org_id, projectId: k.project_id, actor: { kind: 'api_key', id: k.key_id }, requestId: c.requestId, now: () => now },
    { expectedRevision: 'no_stream' },
  );
  if (result.lastPosition) await ports.readSide.waitFor(result.lastPosition, ports.readWaitMs);
  return code;
}
