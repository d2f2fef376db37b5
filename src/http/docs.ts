import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { PRODUCT } from './kernel/openapi-guide.ts';
import type { AppDeps } from './kernel/route.ts';

// The API reference at /docs: Scalar's standalone renderer, served from its npm
// package (no CDN, no outside fonts), over the same document as /openapi.json.
// The page is ours (not the plugin's, whose configuration is an inline script):
// its script and its configuration are files of this origin, so the CSP allows
// scripts from 'self' only. Scalar's components inject their own <style>
// elements, so styles alone may be inline (docs/decisions.md, issue 60).

const require = createRequire(import.meta.url);
const scalarJs = path.join(path.dirname(require.resolve('@scalar/fastify-api-reference')), 'js', 'standalone.js');

/**
 * Scalar's light theme colours its methods, code and secondary text below
 * WCAG AA's 4.5:1 on its light backgrounds (#0084d6 on #f6f6f6 is 3.68:1, and
 * 300-odd such nodes a page, by axe-core): the same hues, darkened to pass.
 */
const CONTRAST_CSS = `.light-mode {
  --scalar-color-blue: #0062a3;
  --scalar-color-green: #006b43;
  --scalar-color-yellow: #7a5600;
  --scalar-color-red: #c00000;
  --scalar-color-orange: #a63a00;
  --scalar-color-3: #5f5f5f;
}`;

/** Scalar's options: the document of this origin, search on `k`, no fonts or proxy from elsewhere. */
const CONFIGURATION = {
  url: '/openapi.json',
  pageTitle: `${PRODUCT} reference`,
  withDefaultFonts: false,
  hideClientButton: true,
  searchHotKey: 'k',
  defaultOpenAllTags: false,
  hideDownloadButton: false,
  showDeveloperTools: 'never',
  agent: { disabled: true },
  mcp: { disabled: true },
  hideTestRequestButton: true,
  metaData: { title: `${PRODUCT} reference` },
  customCss: CONTRAST_CSS,
};

const INIT = `Scalar.createApiReference('#app', ${JSON.stringify(CONFIGURATION)});\n`;

const PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>${PRODUCT} reference</title>
    <meta name="description" content="How to authenticate, call and read every operation of the ${PRODUCT}.">
  </head>
  <body>
    <div id="app"></div>
    <noscript>The reference needs JavaScript; the document itself is <a href="/openapi.json">/openapi.json</a>.</noscript>
    <script src="/docs/scalar.js"></script>
    <script src="/docs/init.js"></script>
  </body>
</html>
`;

/** The page's CSP: scripts of this origin only, inline styles (Scalar injects them), fetches to this origin (the document). */
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

const PAGE_HEADERS = { 'content-security-policy': DOCS_CSP, 'x-frame-options': 'DENY', 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer' };

export async function docsRoutes(app: FastifyInstance, _deps: AppDeps): Promise<void> {
  let js: string | undefined;
  app.get('/docs', async (_req, reply) => reply.headers(PAGE_HEADERS).type('text/html; charset=utf-8').send(PAGE));
  app.get('/docs/', async (_req, reply) => reply.redirect('/docs', 301));
  app.get('/docs/init.js', async (_req, reply) => reply.headers(PAGE_HEADERS).type('application/javascript; charset=utf-8').header('cache-control', 'no-cache').send(INIT));
  app.get('/docs/scalar.js', async (_req, reply) =>
    reply
      .headers(PAGE_HEADERS)
      .type('application/javascript; charset=utf-8')
      .header('cache-control', 'public, max-age=3600')
      .send((js ??= readFileSync(scalarJs, 'utf8'))),
  );
}
