import { timingSafeEqual } from 'node:crypto';
import { oauthGrantDecider, oauthGrantStream, scopeHeld, sha256Hex } from '../../commands/oauth.ts';
import { handleCommand, Rejection } from '../eventstore/handler.ts';
import { randomString } from '../ids.ts';
import { OAUTH_CODE_TTL_MS, OAUTH_CONSENT_TTL_MS } from '../limits.ts';
import type { Db, Queryable } from '../postgres/db.ts';
import type { Ports } from './context.ts';
import { mintSecret, newGrantId } from './oauth-tokens.ts';
import type { PasteAttempt, PasteGuard } from './oauth-paste-guard.ts';
import { addMissingColumns, createMissingIndex, migrate } from '../postgres/schema.ts';

// The consent behind GET and POST /oauth/authorize (spec Part 4.1): the checked
// authorization request is stored server side under a one-time handle that the
// form carries, bound to a cookie (both stored as SHA-256 hashes); the form's
// answer takes the handle once and checks the pasted API key (failed pastes
// counted by the paste guard); a valid key opens the confirmation under a new
// handle bound to that key (the page then names the organization and
// environment granted), whose Allow records the grant with its single-use code.
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
    // The key a confirmation is bound to (null: the form where a key is pasted).
    await addMissingColumns(tx, 'oauth_consent_requests', [['key_id', 'text']]);
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

export type PendingConsent = { cookie_hash: string; client_id: string; redirect_uri: string; code_challenge: string; scopes: string[] | null; state: string | null; used_at: Date | null; key_id: string | null };

/** A taken request again as a checked one (to open its form again, or its confirmation). */
export const requestOf = (p: PendingConsent): ConsentRequest => ({ clientId: p.client_id, redirectUri: p.redirect_uri, challenge: p.code_challenge, scopes: p.scopes, state: p.state ?? undefined });

/** Stores a checked request under a new handle bound to the cookie (and, for a confirmation, to the pasted key's id; expired requests and paste counts swept first); the handle. */
export async function openConsent(db: Queryable, guard: PasteGuard, now: Date, cookie: string, r: ConsentRequest, keyId: string | null = null): Promise<string> {
  const handle = randomString(43);
  await db.query('DELETE FROM oauth_consent_requests WHERE expires_at < $1', [new Date(now.getTime() - OAUTH_CONSENT_TTL_MS).toISOString()]);
  await guard.sweep(now);
  await db.query(
    `INSERT INTO oauth_consent_requests (handle_hash, cookie_hash, client_id, redirect_uri, code_challenge, scopes, state, expires_at, key_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [sha256Hex(handle), sha256Hex(cookie), r.clientId, r.redirectUri, r.challenge, r.scopes ? JSON.stringify(r.scopes) : null, r.state ?? null, new Date(now.getTime() + OAUTH_CONSENT_TTL_MS).toISOString(), keyId],
  );
  return handle;
}

/**
 * Takes the form's handle once: the pending request, unexpired, unused and
 * bound to this cookie. An allow on the form where a key is pasted first
 * reserves a paste attempt against the address's failures (all instances
 * share the count; a valid key gives it back).
 */
export async function takeConsent(db: Queryable, guard: PasteGuard, f: { handle: string; cookie: string | undefined; allow: boolean; address: string; now: Date }): Promise<{ pending: PendingConsent; attempt: PasteAttempt | undefined }> {
  const { rows } = await db.query<PendingConsent>(
    'SELECT cookie_hash, client_id, redirect_uri, code_challenge, scopes, state, used_at, key_id FROM oauth_consent_requests WHERE handle_hash = $1 AND expires_at > $2',
    [sha256Hex(f.handle), f.now.toISOString()],
  );
  const pending = rows[0];
  if (!pending) throw refused('This consent form is unknown or has expired.');
  if (!f.cookie || !sameHex(sha256Hex(f.cookie), pending.cookie_hash)) throw refused('The consent cookie is missing or does not match this form. Open the consent page again from the application.');
  if (pending.used_at !== null) throw refused('This consent form was already used.');
  const attempt = f.allow && pending.key_id === null ? await guard.reserve(f.address, f.now) : undefined;
  // One use: whoever flips used_at first owns the handle.
  const consumed = await db.query('UPDATE oauth_consent_requests SET used_at = $2 WHERE handle_hash = $1 AND used_at IS NULL', [sha256Hex(f.handle), f.now.toISOString()]);
  if (consumed.rowCount !== 1) throw refused('This consent form was already used.');
  return { pending, attempt };
}

type KeyRow = { key_id: string; org_id: string; project_id: string | null; environment: 'live' | 'test'; scopes: string[]; key_hash: string; revoked_at: Date | null; org_name: string; project_name: string | null };
const KEY_SELECT = `SELECT k.key_id, k.org_id, k.project_id, k.environment, k.scopes, k.key_hash, k.revoked_at, o.name AS org_name, p.name AS project_name
  FROM api_keys k JOIN orgs o ON o.org_id = k.org_id LEFT JOIN projects p ON p.id = k.project_id`;

/** A pasted key the page may not take: the form again with this sentence beside the field (not "start again"). */
export const CONSENT_KEY_REFUSED = 'consent_key_refused';

/** What the confirmation names: the organization, environment and project the grant acts in, and the scopes. */
export type ConsentKey = { keyId: string; orgName: string; environment: 'live' | 'test'; projectName: string | null; scopes: string[] };

function checkKey(k: KeyRow | undefined, pending: PendingConsent, refuse: (why: string) => Rejection): ConsentKey {
  if (!k || k.revoked_at !== null) throw refuse('This API key is not valid: it is unknown or revoked. Paste a key of your account (it starts with sk_test_ or sk_live_).');
  const scopes = pending.scopes ?? k.scopes;
  const wider = scopes.filter((s) => !scopeHeld(k.scopes, s));
  if (wider.length > 0) throw refuse(`The application asks for more than this API key holds: ${wider.join(' ')}. Paste a key that holds them.`);
  return { keyId: k.key_id, orgName: k.org_name, environment: k.environment, projectName: k.project_name, scopes };
}

/** The pasted key (by its hash), valid and holding the scopes asked: what the confirmation names. A valid key gives the paste attempt back. */
export async function checkPastedKey(ports: Pick<Ports, 'db'>, guard: PasteGuard, c: { pending: PendingConsent; attempt: PasteAttempt; keyHash: string }): Promise<ConsentKey> {
  const k = (await ports.db.query<KeyRow>(`${KEY_SELECT} WHERE k.key_hash = $1`, [c.keyHash])).rows[0];
  const found = k && sameHex(k.key_hash, c.keyHash) ? k : undefined;
  if (found && found.revoked_at === null) await guard.giveBack(c.attempt);
  return checkKey(found, c.pending, (why) => new Rejection(CONSENT_KEY_REFUSED, why));
}

/** The grant of a confirmed consent, for the key its confirmation is bound to (checked again: a key revoked meanwhile grants nothing): its single-use code. */
export async function grantConsent(ports: Pick<Ports, 'db' | 'store' | 'readSide' | 'readWaitMs'>, c: { pending: PendingConsent; requestId: string; now: Date }): Promise<string> {
  const { pending, now } = c;
  const k = (await ports.db.query<KeyRow>(`${KEY_SELECT} WHERE k.key_id = $1`, [pending.key_id])).rows[0];
  const { scopes } = checkKey(k, pending, refused);
  const key = k!;
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
      orgId: key.org_id,
      keyId: key.key_id,
      projectId: key.project_id,
      environment: key.environment,
      scopes,
      redirectUri: pending.redirect_uri,
      codeChallenge: pending.code_challenge,
      codeHash: sha256Hex(code),
      codeExpiresAt: new Date(now.getTime() + OAUTH_CODE_TTL_MS).toISOString(),
    },
    { orgId: key.org_id, projectId: key.project_id, actor: { kind: 'api_key', id: key.key_id }, requestId: c.requestId, now: () => now },
    { expectedRevision: 'no_stream' },
  );
  if (result.lastPosition) await ports.readSide.waitFor(result.lastPosition, ports.readWaitMs);
  return code;
}
