import type { FastifyInstance, preHandlerHookHandler } from 'fastify';
import type { DashboardDeps } from './context.ts';
import { takeFlash } from './context.ts';
import { Shell, sendPage } from './layout.tsx';

// Home: the organization at a glance (summary and spends per day).

export async function homeRoutes(app: FastifyInstance, _deps: DashboardDeps, signedIn: preHandlerHookHandler): Promise<void> {
  app.get('/dashboard', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const org = person.orgs.find((o) => o.orgId === person.orgId);
    return sendPage(
      reply,
      <Shell person={person} title={org?.name ?? 'Home'} active="home" path="/dashboard" notice={takeFlash(req, reply)}>
        <p id="welcome">Signed in as {person.email}.</p>
      </Shell>,
    );
  });
}
