import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { CALLBACK_PATH, completeConnectLink, startConnectLink } from '../../usecases/connect-links.ts';
import { Rejection } from '../../eventstore/handler.ts';
import { defineRoute, type AppDeps } from '../kernel/route.ts';
import { connectLinkRefusalPage, wantsHtml } from './connect-link-page.ts';
import { Timestamp } from '../kernel/schemas.ts';

// OAuth connect links (spec 4.4, 8): the routes; the use cases are
// src/usecases/connect-links.ts. The callback's refusals answer a person's
// browser with a page (connect-link-page.ts).

const StartBody = z.object({
  redirect_uri: z.url({ protocol: /^https?$/ }).max(2_000),
  server_id: z.string().min(1).max(64),
  user_id: z.string().min(1).max(128).regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces'),
  scopes: z.string().max(1_000).optional(),
});
const StartResponse = z.object({ authorize_url: z.string(), link_token: z.string(), expires_at: Timestamp }).meta({ id: 'ConnectLink' });

export async function connectLinkRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  for (const [url, operationId] of [['/v1/connections/start', 'startConnectLink'], ['/v1/connect/start', 'startConnectLinkAlias']] as const) {
    defineRoute(app, deps, {
      method: 'POST',
      url,
      operationId,
      summary: 'Start an OAuth connect link: the provider authorize URL, a single-use link token (the OAuth state) and its expiry, ten minutes from now',
      tags: ['connections'],
      auth: 'api_key',
      scope: 'connections:write',
      body: StartBody,
      responses: { 200: StartResponse },
      errors: [[400, 'invalid_body'], [400, 'invalid_scope'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'server_unknown'], [404, 'oauth_not_configured'], [500, 'oauth_client_not_configured'], [503, 'vault_unavailable']],
      async handler(ctx) {
        const { auth } = ctx;
        return { status: 200, body: await startConnectLink({ ports: ctx.deps, tenant: { orgId: auth.orgId, projectId: auth.projectId }, run: ctx.run.bind(ctx) }, auth.environment, ctx.body) };
      },
    });
  }

  defineRoute(app, deps, {
    method: 'GET',
    url: CALLBACK_PATH,
    operationId: 'connectLinkCallback',
    summary: "The provider's OAuth redirect: spends the link token, exchanges the code (PKCE), stores the tokens, connects, and redirects to the link's redirect_uri",
    tags: ['connections'],
    auth: 'open',
    query: z.object({ state: z.string().min(1).max(200), code: z.string().min(1).max(2_000).optional(), error: z.string().max(200).optional() }),
    responses: { 302: null },
    errors: [[400, 'invalid_query'], [400, 'link_token_unknown'], [409, 'link_token_used'], [410, 'link_expired']],
    async handler(ctx) {
      try {
        return { status: 302, headers: { location: await completeConnectLink(ctx.deps, ctx.run.bind(ctx), ctx.query) } };
      } catch (err) {
        // A person's browser gets a page that says what happened (same status and code); any other client the envelope.
        const page = err instanceof Rejection && wantsHtml(ctx.req.headers.accept) ? connectLinkRefusalPage(err.code) : undefined;
        if (page) return page;
        throw err;
      }
    },
  });
}
