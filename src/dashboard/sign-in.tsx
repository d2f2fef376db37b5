import { hash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { personDecider, personStream } from '../../commands/person.ts';
import { checkSignInCode, issueSignInCode, orgProjects, personOrgs } from '../usecases/sign-in.ts';
import { Button, ErrorSummary, Field, type FieldError } from './components.tsx';
import { csrfOk, type DashboardDeps, flash, formField, runAs, takeFlash } from './context.ts';
import { PublicShell, sendPage } from './layout.tsx';
import { refusedPage } from './refused.tsx';
import { cookieOptions, personOf, safeNext, SESSION_COOKIE } from './session.ts';
import { DASHBOARD_SESSION_MAX_MS, SIGNIN_CODE_TTL_MS } from '../limits.ts';

// Sign-in with a one-time code: the person types an e-mail, gets a 6-digit
// code (and a link carrying it), types it. The first answer is the same for a
// member and a stranger. A right code opens a new session (a new id, always)
// and records `user.signed_in`; sign-out records `user.signed_out`.

const Email = z.string().trim().toLowerCase().pipe(z.email()).pipe(z.string().max(254));

function EmailForm({ next, email, errors }: { next: string; email?: string; errors: FieldError[] }) {
  return (
    <>
      <ErrorSummary errors={errors} />
      <p>Type the e-mail address your organization knows you by. We send you a code to sign in.</p>
      <form method="post" action="/dashboard/sign-in" novalidate>
        <input type="hidden" name="next" value={next} />
        <Field id="email" label="E-mail address" type="email" autocomplete="email" value={email} error={errors.find((e) => e.field === 'email')?.message} required />
        <Button id="send-code">Send me a code</Button>
      </form>
      <div id="passkey-area" hidden>
        <h2>Or use a passkey</h2>
        <p>If you registered a passkey on this device, sign in with it.</p>
        <button type="button" class="btn btn-secondary" id="passkey-sign-in" data-next={next}>
          Sign in with a passkey
        </button>
      </div>
    </>
  );
}

function CodeForm({ challenge, next, code, errors }: { challenge: string; next: string; code?: string; errors: FieldError[] }) {
  const minutes = Math.round(SIGNIN_CODE_TTL_MS / 60_000);
  return (
    <>
      <ErrorSummary errors={errors} />
      <p id="code-sent">If the address belongs to a member, we sent it a 6-digit code. It works for {minutes} minutes.</p>
      <form method="post" action="/dashboard/sign-in/code" novalidate>
        <input type="hidden" name="c" value={challenge} />
        <input type="hidden" name="next" value={next} />
        <Field id="code" label="Sign-in code" hint="The 6 digits from the e-mail." inputMode="numeric" autocomplete="one-time-code" class="code-input" value={code} maxLength={6} error={errors.find((e) => e.field === 'code')?.message} required />
        <Button id="sign-in">Sign in</Button>
      </form>
      <p>
        <a href={`/dashboard/sign-in${next === '/dashboard' ? '' : `?next=${encodeURIComponent(next)}`}`}>Ask for a new code</a>
      </p>
    </>
  );
}

const CODE_ERRORS: Record<'unknown' | 'expired' | 'locked' | 'wrong', (left: number) => string> = {
  unknown: () => 'This code was already used or never existed. Ask for a new code.',
  expired: () => `This code expired (codes work for ${Math.round(SIGNIN_CODE_TTL_MS / 60_000)} minutes). Ask for a new code.`,
  locked: () => 'Too many wrong tries: this code is locked. Ask for a new code.',
  wrong: (left) => `That code is not right. ${left} ${left === 1 ? 'try' : 'tries'} left.`,
};

/** The client address a limit counts (the socket's, or the trusted proxies' X-Forwarded-For). */
const clientKey = (req: FastifyRequest) => `dashboard-signin-client:${req.ip}`;
const addressKey = (email: string) => `dashboard-signin-address:${hash('sha256', email, 'hex')}`;

/** Opens a new session for an address (the first organization it belongs to), records the sign-in, sets the cookie. */
export async function startSession(deps: DashboardDeps, req: FastifyRequest, reply: FastifyReply, email: string, method: 'code' | 'passkey', passkeyId: string | null, prefer?: string): Promise<boolean> {
  const orgs = await personOrgs(deps.db, email);
  const org = orgs.find((o) => o.userId === prefer) ?? orgs[0];
  if (!org) return false;
  // A session the browser still held ends here: sign-in always makes a new id.
  const old = await personOf(req, deps.db, deps.sessions);
  if (old) await deps.sessions.end(old.sessionId);
  const projects = await orgProjects(deps.db, org.orgId);
  const project = projects.find((p) => p.isDefault) ?? projects[0];
  const { secret, sessionId } = await deps.sessions.create({ email: email.toLowerCase(), userId: org.userId, orgId: org.orgId, projectId: project?.id ?? '' });
  await runAs(deps, req, { kind: 'user', id: org.userId }, org.orgId)(personDecider, personStream(org.userId), { type: 'sign_in', userId: org.userId, sessionId, method, passkeyId });
  reply.setCookie(SESSION_COOKIE, secret, cookieOptions(deps.baseUrl, Math.floor(DASHBOARD_SESSION_MAX_MS / 1000)));
  return true;
}

export async function signInRoutes(app: FastifyInstance, deps: DashboardDeps): Promise<void> {
  app.get('/dashboard/sign-in', async (req, reply) => {
    const next = safeNext((req.query as Record<string, unknown>).next);
    if (await personOf(req, deps.db, deps.sessions)) return reply.redirect(next, 303);
    return sendPage(
      reply,
      <PublicShell title="Sign in" notice={takeFlash(req, reply)} scripts={['simplewebauthn.js', 'passkey.js']}>
        <EmailForm next={next} errors={[]} />
      </PublicShell>,
    );
  });

  app.post('/dashboard/sign-in', async (req, reply) => {
    if (!csrfOk(req, deps.baseUrl, null)) return refusedPage(reply);
    const next = safeNext(formField(req.body, 'next'));
    const parsed = Email.safeParse(formField(req.body, 'email'));
    if (!parsed.success) {
      const errors = [{ field: 'email', message: 'Enter an e-mail address, like name@example.com' }];
      return sendPage(
        reply,
        <PublicShell title="Sign in">
          <EmailForm next={next} email={formField(req.body, 'email')} errors={errors} />
        </PublicShell>,
        400,
      );
    }
    const email = parsed.data;
    try {
      await deps.signInLimits.perClient.take(clientKey(req));
      await deps.signInLimits.perAddress.take(addressKey(email));
    } catch {
      return sendPage(
        reply,
        <PublicShell title="Too many codes asked" notice={{ text: 'Too many sign-in codes were asked.', tone: 'error' }}>
          <p>Wait 15 minutes, then ask again. A code already sent still works until it expires.</p>
        </PublicShell>,
        429,
      );
    }
    const challenge = await issueSignInCode({ db: deps.db, now: deps.now, mailer: deps.mailer, baseUrl: deps.baseUrl, onMailError: (err) => req.log.warn({ err: { message: (err as Error).message } }, 'a sign-in code could not be mailed') }, email);
    return reply.redirect(`/dashboard/sign-in/code?c=${challenge}${next === '/dashboard' ? '' : `&next=${encodeURIComponent(next)}`}`, 303);
  });

  app.get('/dashboard/sign-in/code', async (req, reply) => {
    const q = req.query as Record<string, unknown>;
    const challenge = typeof q.c === 'string' && /^sic_[A-Za-z0-9]{24}$/.test(q.c) ? q.c : null;
    const next = safeNext(q.next);
    if (!challenge) return reply.redirect('/dashboard/sign-in', 303);
    const code = typeof q.code === 'string' && /^\d{6}$/.test(q.code) ? q.code : undefined;
    return sendPage(
      reply,
      <PublicShell title="Enter your code">
        <CodeForm challenge={challenge} next={next} {...(code ? { code } : {})} errors={[]} />
      </PublicShell>,
    );
  });

  app.post('/dashboard/sign-in/code', async (req, reply) => {
    if (!csrfOk(req, deps.baseUrl, null)) return refusedPage(reply);
    const challenge = formField(req.body, 'c');
    const next = safeNext(formField(req.body, 'next'));
    const code = formField(req.body, 'code').replace(/\s+/g, '');
    const checked = /^sic_[A-Za-z0-9]{24}$/.test(challenge) ? await checkSignInCode(deps, challenge, code) : ({ ok: false, reason: 'unknown', triesLeft: 0 } as const);
    if (checked.ok && (await startSession(deps, req, reply, checked.email, 'code', null))) {
      flash(reply, 'You are signed in.');
      return reply.redirect(next, 303);
    }
    const reason = checked.ok ? 'unknown' : checked.reason;
    const errors = [{ field: 'code', message: CODE_ERRORS[reason](checked.ok ? 0 : checked.triesLeft) }];
    return sendPage(
      reply,
      <PublicShell title="Enter your code">
        <CodeForm challenge={challenge} next={next} errors={errors} />
      </PublicShell>,
      400,
    );
  });

  app.post('/dashboard/sign-out', async (req, reply) => {
    const person = await personOf(req, deps.db, deps.sessions);
    if (!csrfOk(req, deps.baseUrl, person)) return refusedPage(reply);
    if (person) {
      await deps.sessions.end(person.sessionId);
      await runAs(deps, req, { kind: 'user', id: person.userId }, person.orgId)(personDecider, personStream(person.userId), { type: 'sign_out', userId: person.userId, sessionId: person.sessionId, everywhere: false });
    }
    reply.clearCookie(SESSION_COOKIE, cookieOptions(deps.baseUrl));
    flash(reply, 'You are signed out.');
    return reply.redirect('/dashboard/sign-in', 303);
  });
}
