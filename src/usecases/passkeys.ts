import { type Passkey, personDecider, personStream, type PersonState } from '../../commands/person.ts';
import { loadState } from '../eventstore/handler.ts';
import type { Db, Queryable } from '../postgres/db.ts';
import { migrate } from '../postgres/schema.ts';
import { newId } from '../ids.ts';
import { PASSKEY_CHALLENGE_TTL_MS } from '../limits.ts';
import type { Ports, RunCommand } from './context.ts';

// A person's passkeys: registered once signed in, listed, removed; and the
// WebAuthn challenges of both ceremonies, one-time rows in PostgreSQL (any
// instance may answer the second half), good for PASSKEY_CHALLENGE_TTL_MS.
// The passkeys themselves are events in the person's stream (public parts:
// credential id, public key); they are read by folding that stream.

export async function migratePasskeyChallenges(db: Db): Promise<void> {
  await migrate(db, (tx) =>
    tx.query(`CREATE TABLE IF NOT EXISTS dashboard_webauthn_challenges (
      id text PRIMARY KEY,
      challenge text NOT NULL,
      user_id text,
      expires_at timestamptz NOT NULL
    )`),
  );
}

/** Keeps a challenge; its id goes back to the browser with the options. */
export async function keepChallenge(p: { db: Queryable; now: () => Date }, challenge: string, userId: string | null): Promise<string> {
  const id = newId('wac', 24);
  await p.db.query('INSERT INTO dashboard_webauthn_challenges (id, challenge, user_id, expires_at) VALUES ($1, $2, $3, $4)', [id, challenge, userId, new Date(p.now().getTime() + PASSKEY_CHALLENGE_TTL_MS)]);
  return id;
}

/** Takes a challenge once (of this user, or of nobody for a sign-in); null when unknown, used or expired. */
export async function takeChallenge(p: { db: Queryable; now: () => Date }, id: string, userId: string | null): Promise<string | null> {
  if (!/^wac_[A-Za-z0-9]{24}$/.test(id)) return null;
  const { rows } = await p.db.query<{ challenge: string }>('DELETE FROM dashboard_webauthn_challenges WHERE id = $1 AND user_id IS NOT DISTINCT FROM $2 AND expires_at > $3 RETURNING challenge', [id, userId, p.now()]);
  return rows[0]?.challenge ?? null;
}

export type PasskeyView = Passkey & { id: string };

export async function listPasskeys(ports: Pick<Ports, 'store'>, userId: string): Promise<PasskeyView[]> {
  const { state } = await loadState<PersonState>(ports.store, personStream(userId), personDecider);
  return [...state.passkeys].map(([id, p]) => ({ id, ...p }));
}

export async function addPasskey(run: RunCommand, userId: string, p: { credentialId: string; publicKey: string; counter: number; transports: string[]; name: string }): Promise<string> {
  const passkeyId = newId('pk');
  await run(personDecider, personStream(userId), { type: 'add_passkey', userId, passkeyId, ...p });
  return passkeyId;
}

export async function removePasskey(run: RunCommand, userId: string, passkeyId: string): Promise<boolean> {
  const r = await run(personDecider, personStream(userId), { type: 'remove_passkey', userId, passkeyId });
  return r.changed;
}

/** The e-mail address of a user (a passkey names a user, sign-in opens a session for their address). */
export async function userEmail(db: Queryable, userId: string): Promise<string | null> {
  const { rows } = await db.query<{ email: string }>('SELECT email FROM users WHERE user_id = $1', [userId]);
  return rows[0]?.email ?? null;
}

