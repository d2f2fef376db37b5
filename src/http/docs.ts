import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import { buildOpenApi } from './kernel/openapi.ts';
import type { AppDeps } from './kernel/route.ts';

// The API reference at /docs: swagger-ui, served from its npm package (no CDN),
// rendering the same OpenAPI document as /openapi.json. @fastify/swagger-ui reads
// the document from `fastify.swagger()`, which @fastify/swagger would provide; our
// document is built from the defineRoute declarations instead, so a two-line
// provider stands in under that plugin name.

export async function docsRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  let doc: unknown;
  const document = () => (doc ??= buildOpenApi(deps.routes, deps.baseUrl, deps.pages));
  const provider = async (f: FastifyInstance) => {
    // JSON is YAML 1.2, so the /docs/yaml address serves the same text.
    f.decorate('swagger', (opts?: { yaml?: boolean }) => (opts?.yaml ? JSON.stringify(document(), null, 2) : document()));
  };
  Object.assign(provider, {
    [Symbol.for('skip-override')]: true,
    [Symbol.for('fastify.display-name')]: '@fastify/swagger',
    [Symbol.for('plugin-meta')]: { name: '@fastify/swagger', fastify: '5.x' },
  });
  await app.register(provider);
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    // No outside validator badge: the page makes no request beyond this service.
    validatorUrl: false,
    uiConfig: { deepLinking: true, displayOperationId: true, docExpansion: 'none' },
  });
}
