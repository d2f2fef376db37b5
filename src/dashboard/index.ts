import type { FastifyInstance } from 'fastify';
import fastifyCookie from '@fastify/cookie';
import fastifyStatic from '@fastify/static';
import path from 'node:path';
import { assetByHashedName } from './assets.ts';
import type { DashboardDeps } from './context.ts';
import { signInRoutes } from './sign-in.tsx';
import { accountRoutes } from './account.tsx';
import { homeRoutes } from './home.tsx';
import { teamRoutes } from './team.tsx';
import { keyRoutes } from './keys.tsx';
import { passkeyRoutes } from './passkeys.tsx';
import { requirePerson } from './session.ts';
import { notFoundPage } from './refused.tsx';
import { approvalsRoutes } from './approvals.tsx';
import { auditPageRoutes } from './audit.tsx';
import { agentRoutes } from './agents.tsx';
import { consumerRoutes } from './consumers.tsx';
import { mandateRoutes } from './mandates.tsx';
import { pixRoutes } from './pix.tsx';
import { bankRoutes } from './bank.tsx';

// The dashboard: the people's surface, server-rendered HTML under
// /dashboard over the same use cases as the HTTP API (never over the API).
// Each page is its own module; they are listed here, explicitly. Cookies are
// read in this scope only: the /v1 routes never parse them.

export type { DashboardDeps } from './context.ts';

export async function dashboardRoutes(app: FastifyInstance, deps: DashboardDeps): Promise<void> {
  await app.register(fastifyCookie);
  // serve: false: the assets are answered by their hashed names below, through reply.sendFile.
  await app.register(fastifyStatic, { root: path.join(import.meta.dirname, 'assets'), serve: false });

  app.get('/', async (_req, reply) => reply.redirect('/dashboard', 303));
  app.get('/dashboard/assets/:name', async (req, reply) => {
    const a = assetByHashedName((req.params as { name: string }).name);
    if (!a) return reply.code(404).type('text/plain; charset=utf-8').send('no such asset');
    reply.header('x-content-type-options', 'nosniff').type(a.type);
    return reply.sendFile(path.basename(a.file), path.dirname(a.file), { immutable: true, maxAge: 365 * 24 * 60 * 60 * 1000, cacheControl: true });
  });

  const signedIn = requirePerson(deps.db, deps.sessions);
  await signInRoutes(app, deps);
  await accountRoutes(app, deps, signedIn);
  await homeRoutes(app, deps, signedIn);
  await teamRoutes(app, deps, signedIn);
  await keyRoutes(app, deps, signedIn);
  await passkeyRoutes(app, deps, signedIn);
  await approvalsRoutes(app, deps, signedIn);
  await auditPageRoutes(app, deps, signedIn);
  await agentRoutes(app, deps, signedIn);
  await consumerRoutes(app, deps, signedIn);
  await mandateRoutes(app, deps, signedIn);
  await pixRoutes(app, deps, signedIn);
  await bankRoutes(app, deps, signedIn);
  // Any other path under /dashboard is a person's mistyped or stale link: a page, not the API's JSON 404.
  app.get('/dashboard/*', async (req, reply) => notFoundPage(reply, req.url.split('?')[0]!.slice(0, 200)));
}
