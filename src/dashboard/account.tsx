import type { FastifyInstance, preHandlerHookHandler } from 'fastify';
import { personDecider, personStream } from '../../commands/person.ts';
import { Button, PostForm } from './components.tsx';
import { csrfOk, type DashboardDeps, flash, formField, personRun, takeFlash } from './context.ts';
import { Shell, sendPage } from './layout.tsx';
import { refusedPage } from './refused.tsx';
import { cookieOptions, type Environment, safeNext, SESSION_COOKIE } from './session.ts';
import { orgProjects } from '../usecases/sign-in.ts';
import { listPasskeys } from '../usecases/passkeys.ts';
import { PasskeySection } from './passkeys.tsx';

// The person's own page: who they are signed in as, sign out everywhere
// (passkeys join it); and the header's switchers (organization, project,
// test/live), which move the session.

export async function accountRoutes(app: FastifyInstance, deps: DashboardDeps, signedIn: preHandlerHookHandler): Promise<void> {
  app.get('/dashboard/account', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const passkeys = await listPasskeys(deps, person.userId);
    return sendPage(
      reply,
      <Shell person={person} title="Your account" active="account" path="/dashboard/account" notice={takeFlash(req, reply)} scripts={['simplewebauthn.js', 'passkey.js']}>
        <div class="panel">
          <p>
            Signed in as <strong id="account-email">{person.email}</strong>, {person.role} of {person.orgs.find((o) => o.orgId === person.orgId)?.name}.
          </p>
          <h2>Sessions</h2>
          <p>Sign out of this browser and every other one where you are signed in.</p>
          <PostForm action="/dashboard/account/sign-out-everywhere" csrf={person.csrfToken}>
            <Button kind="danger" id="sign-out-everywhere">
              Sign out everywhere
            </Button>
          </PostForm>
        </div>
        <PasskeySection person={person} passkeys={passkeys} now={deps.now()} />
      </Shell>,
    );
  });

  app.post('/dashboard/account/sign-out-everywhere', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    if (!csrfOk(req, deps.baseUrl, person)) return refusedPage(reply);
    const ended = await deps.sessions.endAll(person.email);
    await personRun(deps, req, person)(personDecider, personStream(person.userId), { type: 'sign_out', userId: person.userId, sessionId: person.sessionId, everywhere: true });
    reply.clearCookie(SESSION_COOKIE, cookieOptions(deps.baseUrl));
    flash(reply, `You are signed out everywhere (${ended} ${ended === 1 ? 'session' : 'sessions'} closed).`);
    return reply.redirect('/dashboard/sign-in', 303);
  });

  app.post('/dashboard/switch', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    if (!csrfOk(req, deps.baseUrl, person)) return refusedPage(reply);
    const next = safeNext(formField(req.body, 'next'));
    const org = formField(req.body, 'org');
    const project = formField(req.body, 'project');
    const environment = formField(req.body, 'environment');
    if (org) {
      const o = person.orgs.find((x) => x.orgId === org);
      if (!o) return (flash(reply, 'You are not a member of that organization.', 'error'), reply.redirect(next, 303));
      const projects = await orgProjects(deps.db, o.orgId);
      await deps.sessions.update(person.sessionId, { orgId: o.orgId, userId: o.userId, projectId: (projects.find((p) => p.isDefault) ?? projects[0])?.id ?? '' });
      flash(reply, `Now working in ${o.name}.`);
    } else if (project) {
      const p = person.projects.find((x) => x.id === project);
      if (!p) return (flash(reply, 'That project is not in this organization.', 'error'), reply.redirect(next, 303));
      // A project is of one environment (test and live are two worlds, issue 60): the switch follows it.
      await deps.sessions.update(person.sessionId, { projectId: p.id, environment: p.environment });
      flash(reply, `Now working in the project ${p.name}.`);
    } else if (environment === 'test' || environment === 'live') {
      // The data shown is a project's: the current one if it is of that environment, else the first of it (the list puts the default first).
      const here = person.projects.find((x) => x.id === person.projectId);
      const p = here?.environment === environment ? here : person.projects.find((x) => x.environment === environment);
      await deps.sessions.update(person.sessionId, { environment: environment as Environment, ...(p ? { projectId: p.id } : {}) });
      flash(reply, environment === 'live' ? 'Showing live data.' : 'Showing test data.');
    }
    return reply.redirect(next, 303);
  });
}
