import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ProxyRequest, proxyExecute } from '../usecases/session-proxy.ts';
import { activeSession } from '../usecases/sessions.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';
import { IdParam } from './kernel/schemas.ts';
import { tenantOf } from './kernel/auth.ts';

// POST /v1/sessions/{id}/proxy_execute {server, endpoint, method, params?,
// body?, headers?}: one request to a connected provider's own API with the
// session end user's connection, policies applied as to a tool call
// (`<server>/proxy_execute`), recorded and sealed (src/usecases/session-proxy.ts).
// Answers {status, data, headers, duration, proxy_call_id} whatever the
// provider's status; 502 provider_error when the provider was not reached.

const ProxyResult = z
  .object({
    status: z.number().int().meta({ description: "The provider's HTTP status" }),
    data: z.unknown().meta({ description: "The provider's answer: JSON, else its text" }),
    headers: z.record(z.string(), z.string()).describe("The provider's response headers (without `set-cookie` and the hop-by-hop headers)."),
    duration: z.number().int().meta({ description: 'milliseconds' }),
    proxy_call_id: z.string(),
  })
  .meta({ id: 'ProxyResult' });

export async function sessionProxyRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/sessions/:id/proxy_execute',
    operationId: 'proxyExecuteSession',
    summary: "Call a connected provider's own API with the session end user's connection (a path under the provider's base URL); recorded (pxc_...) and sealed, policies applied as to a tool call (`<server>/proxy_execute`); answers the provider's status, data and headers",
    tags: ['sessions'],
    auth: 'key_or_service',
    scope: 'sessions:write',
    params: z.object({ id: IdParam }),
    body: ProxyRequest,
    responses: { 200: ProxyResult },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [403, 'policy_denied'], [404, 'not_found'], [409, 'session_closed'], [424, 'not_connected'], [502, 'provider_error']],
    async handler(ctx) {
      const s = await activeSession(ctx.deps, await tenantOf(ctx), ctx.params.id);
      return { status: 200, body: await proxyExecute(ctx.deps, ctx.run.bind(ctx), s, ctx.body) };
    },
  });
}
