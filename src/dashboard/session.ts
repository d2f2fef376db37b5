import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Db, Queryable } from '../postgres/db.ts';
import { migrate } from '../postgres/schema.ts';
import { newId } from '../ids.ts';
import type { Role } from '../../commands/org.ts';
import { DASHBOARD_SESSION_IDLE_MS, DASHBOARD_SESSION_MAX_MS, DASHBOARD_SESSION_TOUCH_MS } from '../limits.ts';
import { personOrgs, type PersonOrg, type PersonProject, orgProjects } from '../usecases/sign-in.ts';

// Dashboard sessions, in PostgreSQL so every instance honours them. The
// cookie carries a random secret (32 bytes, base64url); the table keeps only
// its SHA-256, beside the session's public id (the one events record). A
// session ends when signed out, after DASHBOARD_SESSION_IDLE_MS without a
// request, or DASHBOARD_SESSION_MAX_MS after sign-in. The CSRF token is
// derived from the secret (a hash of it under its own label), so it is per
// session, stored nowhere, and reveals nothing of the cookie.

export const SESSION_COOKIE = 'dash_session';
export const FLASH_COOKIE = 'dash_flash';

export type Environment = 'test' | 'live';

/** The signed-in person, as every dashboard page sees them. */
export type Person = {
  sessionId: string;
  userId: string;
  email: string;
  orgId: string;
  /** The person's role in the organization (a project override may raise or narrow it in one project). */
  role: Role;
  projectId: string;
  environment: Environment;
  csrfToken: string;
  /** Every organization this address belongs to (the switcher lists them). */
  orgs: PersonOrg[];
  /** The current organization's projects. */
  projects: PersonProject[];
};

declare module 'fastify' {
  interface FastifyRequest {
    person?: Person;
  }
}

const sha256hex = (s: string) => hash('sha256', s, 'hex');
export const csrfTokenOf = (secret: string) => hash('sha256', `dashboard-csrf\n${secret}`, 'base64url');

export async function migrateDashboardSessions(db: Db): Promise<void> {
  await migrate(db, (tx) =>
    tx.query(`CREATE TABLE IF NOT EXISTS dashboard_sessions (
      secret_hash text PRIMARY KEY,
      session_id text NOT NULL UNIQUE,
      email text NOT NULL,
      user_id text NOT NULL,
      org_id text NOT NULL,
      project_id text NOT NULL,
      environment text NOT NULL,
      created_at timestamptz NOT NULL,
      last_seen_at timestamptz NOT NULL,
      ended_at timestamptz
    );
    CREATE INDEX IF NOT EXISTS dashboard_sessions_email ON dashboard_sessions (email)`),
  );
}

type SessionRow = { session_id: string; email: string; user_id: string; org_id: string; project_id: string; environment: Environment; created_at: Date; last_seen_at: Date };

export class Sessions {
  constructor(
    private readonly db: Queryable,
    private readonly now: () => Date,
  ) {}

  /** A new session (a new public id and a new secret) for a person acting as `userId` of `orgId`. */
  async create(p: { email: string; userId: string; orgId: string; projectId: string }): Promise<{ secret: string; sessionId: string }> {
    const secret = randomBytes(32).toString('base64url');
    const sessionId = newId('dss');
    const now = this.now();
    await this.db.query(
      `INSERT INTO dashboard_sessions (secret_hash, session_id, email, user_id, org_id, project_id, environment, created_at, last_seen_at)
       VALUES ($1, $2, $3, $4, $5, $6, 'test', $7, $7)`,
      [sha256hex(secret), sessionId, p.email, p.userId, p.orgId, p.projectId, now],
    );
    return { secret, sessionId };
  }

  /** The live session a cookie secret opens, touched at most once a minute; null when absent, ended or expired. */
  async open(secret: string): Promise<SessionRow | null> {
    if (!/^[A-Za-z0-9_-]{43}$/.test(secret)) return null;
    const { rows } = await this.db.query<SessionRow>(
      'SELECT session_id, email, user_id, org_id, project_id, environment, created_at, last_seen_at FROM dashboard_sessions WHERE secret_hash = $1 AND ended_at IS NULL',
      [sha256hex(secret)],
    );
    const s = rows[0];
    if (!s) return null;
    const now = this.now().getTime();
    if (now - s.last_seen_at.getTime() >= DASHBOARD_SESSION_IDLE_MS || now - s.created_at.getTime() >= DASHBOARD_SESSION_MAX_MS) return null;
    if (now - s.last_seen_at.getTime() >= DASHBOARD_SESSION_TOUCH_MS) {
      await this.db.query('UPDATE dashboard_sessions SET last_seen_at = $2 WHERE session_id = $1', [s.session_id, this.now()]);
    }
    return s;
  }

  /** Moves the session to another organization (as that organization's user), project or environment. */
  async update(sessionId: string, p: { userId?: string; orgId?: string; projectId?: string; environment?: Environment }): Promise<void> {
    await this.db.query(
      `UPDATE dashboard_sessions SET user_id = COALESCE($2, user_id), org_id = COALESCE($3, org_id), project_id = COALESCE($4, project_id), environment = COALESCE($5, environment)
       WHERE session_id = $1 AND ended_at IS NULL`,
      [sessionId, p.userId ?? null, p.orgId ?? null, p.projectId ?? null, p.environment ?? null],
    );
  }

  /** Ends one session. */
  async end(sessionId: string): Promise<void> {
    await this.db.query('UPDATE dashboard_sessions SET ended_at = $2 WHERE session_id = $1 AND ended_at IS NULL', [sessionId, this.now()]);
  }

  /** Ends every session of an e-mail address (sign out everywhere); how many were open. */
  async endAll(email: string): Promise<number> {
    const r = await this.db.query('UPDATE dashboard_sessions SET ended_at = $2 WHERE email = $1 AND ended_at IS NULL', [email, this.now()]);
    return r.rowCount;
  }
}

/** The cookie's attributes: HttpOnly, SameSite=Lax, Path=/dashboard, Secure behind https. */
export function cookieOptions(baseUrl: string, maxAgeSeconds?: number) {
  return { httpOnly: true, sameSite: 'lax' as const, path: '/dashboard', secure: baseUrl.startsWith('https:'), ...(maxAgeSeconds !== undefined ? { maxAge: maxAgeSeconds } : {}) };
}

/** A `next` that stays inside the dashboard: a path under /dashboard, nothing else. */
export function safeNext(next: unknown): string {
  if (typeof next !== 'string') return '/dashboard';
  if (!/^\/dashboard(\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*)?(\?[A-Za-z0-9._~!$&'()*+,;=:@%/?-]*)?$/.test(next) || next.includes('//') || next.includes('/..')) return '/dashboard';
  return next;
}

/**
 * The service credential the dashboard acts with: the same shape as the HTTP
 * layer's ServiceAuth (src/http/kernel/auth.ts), the same person `x-svc-user`
 * names (declared here: no surface imports another).
 */
export type ServiceAuth = { kind: 'service'; orgId: string; userId: string; role: Role; projectId?: string };

/** The service credential the dashboard passes to the use cases: the same person `x-svc-user` names. */
export function serviceAuthOf(person: Person): ServiceAuth {
  return { kind: 'service', orgId: person.orgId, userId: person.userId, role: person.role, projectId: person.projectId };
}

/** Compares a presented CSRF token with the session's, in constant time. */
export function sameToken(presented: unknown, expected: string): boolean {
  if (typeof presented !== 'string') return false;
  const a = Buffer.from(presented);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * The signed-in person of a request, or null: the session the cookie opens,
 * still a member of its organization (a removed member's session opens nothing).
 */
export async function personOf(req: FastifyRequest, db: Queryable, sessions: Sessions): Promise<Person | null> {
  const secret = req.cookies[SESSION_COOKIE];
  if (!secret) return null;
  const s = await sessions.open(secret);
  if (!s) return null;
  const orgs = await personOrgs(db, s.email);
  const here = orgs.find((o) => o.orgId === s.org_id && o.userId === s.user_id);
  if (!here) return null;
  const projects = await orgProjects(db, s.org_id);
  const projectId = projects.some((p) => p.id === s.project_id) ? s.project_id : (projects.find((p) => p.isDefault)?.id ?? projects[0]?.id ?? s.project_id);
  return { sessionId: s.session_id, userId: s.user_id, email: s.email, orgId: s.org_id, role: here.role, projectId, environment: s.environment, csrfToken: csrfTokenOf(secret), orgs, projects };
}

/** A preHandler: the person, or a 303 to sign-in with a `next` back here. */
export function requirePerson(db: Queryable, sessions: Sessions) {
  return async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const person = await personOf(req, db, sessions);
    if (!person) {
      const next = req.method === 'GET' ? safeNext(req.url) : '/dashboard';
      return void (await reply.redirect(`/dashboard/sign-in${next === '/dashboard' ? '' : `?next=${encodeURIComponent(next)}`}`, 303));
    }
    req.person = person;
  };
}
