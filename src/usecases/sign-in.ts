import { hash, randomInt, timingSafeEqual } from 'node:crypto';
import type { Role } from '../../commands/org.ts';
import type { Db, Queryable } from '../postgres/db.ts';
import { migrate } from '../postgres/schema.ts';
import { newId } from '../ids.ts';
import { SIGNIN_CODE_MAX_TRIES, SIGNIN_CODE_TTL_MS } from '../limits.ts';
import type { Mailer } from '../adapters/mail/port.ts';

// Sign-in for people: an e-mail address receives a one-time 6-digit code
// (and a link carrying it), valid SIGNIN_CODE_TTL_MS, SIGNIN_CODE_MAX_TRIES
// tries, then locked. The people are the organizations' users (the members
// `x-svc-user` names), found by address. Codes are operational rows, kept as
// a hash salted with their challenge's id; the answer to "send me a code" is
// the same for a member and a stranger (the same rows written, the mail
// queued, not awaited), so it tells nobody whether an address belongs.

export type PersonOrg = { orgId: string; name: string; userId: string; role: Role };
export type PersonProject = { id: string; name: string; slug: string; environment: 'live' | 'test'; isDefault: boolean };

export async function migrateSignInCodes(db: Db): Promise<void> {
  await migrate(db, (tx) =>
    tx.query(`CREATE TABLE IF NOT EXISTS dashboard_signin_codes (
      challenge_id text PRIMARY KEY,
      email text NOT NULL,
      code_hash text NOT NULL,
      created_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL,
      tries integer NOT NULL DEFAULT 0,
      used_at timestamptz
    )`),
  );
}

/** Every organization an address is a user of, by organization name. */
export async function personOrgs(db: Queryable, email: string): Promise<PersonOrg[]> {
  const { rows } = await db.query<{ org_id: string; name: string; user_id: string; role: Role }>(
    'SELECT u.org_id, o.name, u.user_id, u.role FROM users u JOIN orgs o ON o.org_id = u.org_id WHERE lower(u.email) = lower($1) ORDER BY o.name, u.org_id',
    [email],
  );
  return rows.map((r) => ({ orgId: r.org_id, name: r.name, userId: r.user_id, role: r.role }));
}

/** An organization's live projects, the default first. */
export async function orgProjects(db: Queryable, orgId: string): Promise<PersonProject[]> {
  const { rows } = await db.query<{ id: string; name: string; slug: string; environment: 'live' | 'test'; is_default: boolean }>(
    'SELECT id, name, slug, environment, is_default FROM projects WHERE org_id = $1 AND deleted_at IS NULL ORDER BY is_default DESC, projects.created_at, id',
    [orgId],
  );
  return rows.map((r) => ({ id: r.id, name: r.name, slug: r.slug, environment: r.environment, isDefault: r.is_default }));
}

const codeHash = (challengeId: string, code: string) => hash('sha256', `dashboard-code\n${challengeId}\n${code}`, 'hex');

export type SignInMail = { to: string; code: string; link: string };

/**
 * A new code for an address: the challenge's id (the page that asks for the
 * code carries it). The mail goes only to a member, queued (not awaited), so
 * a stranger's answer takes the same path and time.
 */
export async function issueSignInCode(p: { db: Queryable; now: () => Date; mailer: Mailer; baseUrl: string; onMailError: (err: unknown) => void }, email: string): Promise<string> {
  const challengeId = newId('sic', 24);
  const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
  const now = p.now();
  const members = await personOrgs(p.db, email);
  await p.db.query('INSERT INTO dashboard_signin_codes (challenge_id, email, code_hash, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)', [
    challengeId,
    email,
    codeHash(challengeId, code),
    now,
    new Date(now.getTime() + SIGNIN_CODE_TTL_MS),
  ]);
  const link = `${p.baseUrl}/dashboard/sign-in/code?c=${challengeId}&code=${code}`;
  if (members.length > 0) {
    const minutes = Math.round(SIGNIN_CODE_TTL_MS / 60_000);
    void p.mailer
      .send({
        to: email,
        subject: 'Your dashboard sign-in code',
        text: `Your sign-in code is ${code}. It works for ${minutes} minutes.\n\nOr open this link and press "Sign in":\n${link}\n\nIf you did not ask to sign in, ignore this message.`,
        code,
      })
      .catch(p.onMailError);
  }
  return challengeId;
}

export type CodeCheck = { ok: true; email: string } | { ok: false; reason: 'unknown' | 'expired' | 'locked' | 'wrong'; triesLeft: number };

/** Checks a code against its challenge: each try counts (also across instances), the fifth wrong one locks it; a right one is used up. */
export async function checkSignInCode(p: { db: Queryable; now: () => Date }, challengeId: string, code: string): Promise<CodeCheck> {
  const { rows } = await p.db.query<{ email: string; code_hash: string; expires_at: Date; tries: number }>(
    'UPDATE dashboard_signin_codes SET tries = tries + 1 WHERE challenge_id = $1 AND used_at IS NULL RETURNING email, code_hash, expires_at, tries',
    [challengeId],
  );
  const r = rows[0];
  if (!r) return { ok: false, reason: 'unknown', triesLeft: 0 };
  if (r.expires_at.getTime() <= p.now().getTime()) return { ok: false, reason: 'expired', triesLeft: 0 };
  if (r.tries > SIGNIN_CODE_MAX_TRIES) return { ok: false, reason: 'locked', triesLeft: 0 };
  const presented = Buffer.from(codeHash(challengeId, /^\d{6}$/.test(code) ? code : '-'));
  if (!timingSafeEqual(presented, Buffer.from(r.code_hash))) {
    const left = SIGNIN_CODE_MAX_TRIES - r.tries;
    return { ok: false, reason: left > 0 ? 'wrong' : 'locked', triesLeft: left };
  }
  const used = await p.db.query('UPDATE dashboard_signin_codes SET used_at = $2 WHERE challenge_id = $1 AND used_at IS NULL', [challengeId, p.now()]);
  if (used.rowCount !== 1) return { ok: false, reason: 'unknown', triesLeft: 0 };
  return { ok: true, email: r.email };
}

/** Forgets codes that expired a day ago or more (called now and then by sign-in). */
export async function sweepSignInCodes(db: Queryable, now: Date): Promise<void> {
  await db.query("DELETE FROM dashboard_signin_codes WHERE expires_at < $1::timestamptz - interval '1 day'", [now]);
}
