import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Actor } from '../../events/common.ts';
import { handleCommand, type Rejection } from '../eventstore/handler.ts';
import type { Role } from '../../commands/org.ts';
import type { Mailer } from '../adapters/mail/port.ts';
import type { Ports, RunCommand } from '../usecases/context.ts';
import type { ReadSide } from '../readside.ts';
import type { KeyUsage } from '../usecases/key-usage.ts';
import { FLASH_COOKIE, type Person, sameToken, type Sessions } from './session.ts';

// What every dashboard page reaches: the use cases' ports, the sessions, the
// mail port and the sign-in limits; and the helpers every page shares: run a
// command as the signed-in person, the CSRF and origin check, the flash.

/** A limit counted in PostgreSQL for every instance: resolves when admitted, rejects when over (src/app.ts gives the HTTP layer's shared limiter). */
export type Limiter = { take(key: string): Promise<unknown> };

export type DashboardDeps = Ports & {
  /** The read side's positions too (the approvals feed follows them). */
  readSide: Pick<ReadSide, 'waitFor' | 'progress'>;
  mailer: Mailer;
  signInLimits: { perAddress: Limiter; perClient: Limiter };
  sessions: Sessions;
  /** The app's own ports object (not a copy): what is kept per app by identity (the browser worker, hosted browsers' live views) is found by it. */
  appPorts: Ports;
  /** Keys' daily counts against the rate limit (the Usage page); absent in apps built without the API. */
  keyUsage?: KeyUsage;
};

/** Runs a command as the person (actor `user`), in their organization, and waits until the read side has it. */
export function runAs(deps: DashboardDeps, req: FastifyRequest, actor: Actor, orgId: string): RunCommand {
  return async (decider, stream, command, opts = {}) => {
    const result = await handleCommand(deps.store, decider, stream, command, { orgId: opts.orgId ?? orgId, projectId: opts.projectId ?? null, actor, requestId: String(req.id), now: deps.now }, opts);
    if (result.lastPosition) await deps.readSide.waitFor(result.lastPosition, deps.readWaitMs);
    return result;
  };
}

export const personRun = (deps: DashboardDeps, req: FastifyRequest, person: Person): RunCommand => runAs(deps, req, { kind: 'user', id: person.userId }, person.orgId);

/**
 * Whether a request comes from a page of this service: Sec-Fetch-Site, which
 * every current browser sends, must say same-origin; without it, Origin must
 * be this service's public origin or the one the request was addressed to.
 * (Under Referrer-Policy no-referrer a browser's form POST says `Origin: null`,
 * so Sec-Fetch-Site decides when present.) Neither header: refused.
 */
function sameOrigin(req: FastifyRequest, baseUrl: string): boolean {
  const site = req.headers['sec-fetch-site'];
  if (typeof site === 'string') return site === 'same-origin';
  const origin = req.headers.origin;
  if (typeof origin !== 'string') return false;
  return origin === new URL(baseUrl).origin || origin === `${req.protocol}://${req.host}`;
}

/** A field of a parsed form body (the first, when repeated), or ''. */
export function formField(body: unknown, name: string): string {
  if (typeof body !== 'object' || body === null || !Object.hasOwn(body, name)) return '';
  const v = (body as Record<string, unknown>)[name];
  const s = Array.isArray(v) ? v[0] : v;
  return typeof s === 'string' ? s : '';
}

/** Whether a state-changing request may proceed: from this origin and, with a session, carrying its CSRF token (form field or header). */
export function csrfOk(req: FastifyRequest, baseUrl: string, person: Person | null): boolean {
  if (!sameOrigin(req, baseUrl)) return false;
  if (!person) return true;
  const header = req.headers['x-csrf-token'];
  return sameToken(typeof header === 'string' ? header : formField(req.body, '_csrf'), person.csrfToken);
}

/** Sets the message the next page's notice shows (post, redirect, get). */
export function flash(reply: FastifyReply, text: string, tone: 'ok' | 'error' = 'ok'): void {
  reply.setCookie(FLASH_COOKIE, JSON.stringify({ text: text.slice(0, 300), tone }), { path: '/dashboard', httpOnly: true, sameSite: 'lax', maxAge: 60 });
}

/** The flash set by the last action, cleared once read. */
export function takeFlash(req: FastifyRequest, reply: FastifyReply): { text: string; tone: 'ok' | 'error' } | null {
  const raw = req.cookies[FLASH_COOKIE];
  if (!raw) return null;
  reply.clearCookie(FLASH_COOKIE, { path: '/dashboard' });
  try {
    const v = JSON.parse(raw) as { text?: unknown; tone?: unknown };
    return typeof v.text === 'string' ? { text: v.text.slice(0, 300), tone: v.tone === 'error' ? 'error' : 'ok' } : null;
  } catch {
    return null;
  }
}

const RANK: Record<Role, number> = { member: 1, admin: 2, owner: 3 };
/** Whether a role reaches `min` (member < admin < owner), as the HTTP API ranks them. */
export const atLeast = (role: Role, min: Role) => RANK[role] >= RANK[min];

/** A use case's refusal, said to a person (the decider's own message where no better words are known). */
const REFUSALS: Record<string, string> = {
  user_exists: 'Someone with this e-mail address is already a member of this organization.',
  user_not_in_org: 'That person is not a member of this organization (any more).',
  owner_required: 'Only an owner can make someone an owner, or change or remove an owner.',
  last_owner: 'The organization needs at least one owner: make someone else owner first.',
  cannot_override_owner: "An owner is an owner in every project: their role there cannot be overridden.",
  not_found: 'That no longer exists: reload the page.',
  passkey_limit: 'You hold the most passkeys allowed: remove one first.',
};
export const rejectionText = (r: Rejection) => REFUSALS[r.code] ?? `${r.message[0]?.toUpperCase() ?? ''}${r.message.slice(1)}.`;
