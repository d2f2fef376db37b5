import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { hostedConnectDecider, hostedConnectStream, ownSession, usable } from '../../commands/hosted-connect.ts';
import { HOSTED_MERCHANTS, type HostedMerchant } from '../../events/hosted-connect.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import { HOSTED_INPUT_TEXT_MAX_CHARS } from '../limits.ts';
import { encodeCredential } from '../providers/credentials.ts';
import { ConnectionView } from './connection-schemas.ts';
import { readConnection, upsertConnection } from '../usecases/connections.ts';
import { ApiError } from './errors.ts';
import { escapeHtml, pageSecurityHeaders } from './html.ts';
import { claimForFinish, closeFinished, closeWithApp, forwardInput, HostedStartError, liveSession, liveView, openHosted, openViewerStream, recordExpired, releaseClaim, SPECIAL_KEYS, type SpecialKey } from './hosted-browser.ts';
import { newId } from './ids.ts';
import { defineRoute, type AppDeps } from './route.ts';
import { workerOf } from '../usecases/signup-runner.ts';

// Hosted-browser connect (spec 4.16): start opens a browser-worker context on
// the merchant's login page and answers the ids and our live-view URL; the
// person logs in on the merchant's page through the live view (a DevTools
// screencast, their clicks and keys forwarded); finish captures the logged-in
// state into the vault as a connection (auth_type `browser_session`). The
// session id is single use and bound to the organization and project that
// started it. 502 `browser_worker_failed` when the worker refused or failed
// (a retry mints a new context and session), 503 `browser_worker_unavailable`
// when none is configured.

export const MERCHANT_A_NOTE = 'Checkout is not supported for merchant-a yet; your login is stored for later use.';
export const LIVE_VIEW_PATH = '/connect/live';
const CONNECTION_AUTH_TYPE = 'browser_session';
const NAMES: Record<HostedMerchant, string> = { 'merchant-a': 'Merchant A', 'merchant-b': 'Merchant B' };

const StartResponse = z
  .object({
    merchant: z.enum(HOSTED_MERCHANTS),
    context_id: z.string(),
    session_id: z.string(),
    live_view_url: z.string(),
    checkout_supported: z.literal(false).optional(),
    note: z.string().optional(),
  })
  .meta({ id: 'HostedConnectStart' });
const FinishResponse = z.object({ merchant: z.enum(HOSTED_MERCHANTS), session_id: z.string(), connection: ConnectionView }).meta({ id: 'HostedConnectFinish' });
const Token = z.string().regex(/^[A-Za-z0-9_-]{43}$/, 'a live-view token');
const Fraction = z.number().min(0).max(1);
const InputBody = z.discriminatedUnion('type', [
  z.object({ type: z.literal('click'), x: Fraction, y: Fraction }),
  z.object({ type: z.literal('scroll'), x: Fraction, y: Fraction, dy: z.number().min(-5_000).max(5_000) }),
  z.object({ type: z.literal('text'), text: z.string().min(1).max(HOSTED_INPUT_TEXT_MAX_CHARS) }),
  z.object({ type: z.literal('key'), key: z.enum(Object.keys(SPECIAL_KEYS) as [SpecialKey, ...SpecialKey[]]) }),
]);

/** The cookie binding a live view to the browser that first opened it (Path: that live view only). */
const VIEWER_COOKIE = 'hosted_viewer';
function viewerCookieOf(header: string | undefined): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === VIEWER_COOKIE) return part.slice(i + 1).trim();
  }
  return undefined;
}

const endedPage = () =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>This live view has ended</title></head><body><h1>This live view has ended</h1><p>The browser session is closed, the link is not valid, or it is already open in another browser. Return to the application and start again.</p></body></html>`;

function viewerPage(merchant: HostedMerchant, nonce: string): string {
  const name = escapeHtml(NAMES[merchant]);
  const keys = JSON.stringify(Object.keys(SPECIAL_KEYS));
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Log in to ${name}</title>
<style>body{font-family:system-ui,sans-serif;margin:1rem;color:#1a1a1a}#screen{display:block;max-width:100%;border:1px solid #888;cursor:pointer;outline:none}#screen:focus{border-color:#06c}#bar{margin:.5rem 0;font-size:.9rem;color:#444}</style></head><body>
<h1>Log in to ${name}</h1>
<p>This is ${name}'s page, running in a browser on our server. Click into it and type to log in yourself: the agent never sees what you type. When you are logged in, return to the application.</p>
<p id="bar"><span id="state">Connecting…</span> · <span id="remote-title"></span> · <span id="remote-url"></span></p>
<img id="screen" tabindex="0" alt="${name}'s page">
<script nonce="${nonce}">
(() => {
  const $ = (id) => document.getElementById(id);
  const img = $('screen');
  const base = location.pathname.replace(/\\/+$/, '');
  const keys = ${keys};
  const es = new EventSource(base + '/frames');
  es.addEventListener('frame', (e) => {
    const f = JSON.parse(e.data);
    img.src = f.image;
    img.dataset.seq = String(f.seq);
    img.dataset.width = String(f.width);
    img.dataset.height = String(f.height);
    $('remote-title').textContent = f.title;
    $('remote-url').textContent = f.url;
    $('state').textContent = 'Live';
  });
  es.addEventListener('ended', () => { $('state').textContent = 'This session has ended.'; es.close(); });
  es.onerror = () => { if (es.readyState === EventSource.CLOSED) $('state').textContent = 'This session has ended.'; };
  let chain = Promise.resolve();
  const send = (msg) => {
    chain = chain.then(() => fetch(base + '/input', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(msg) })).catch(() => {});
    img.dataset.sent = String(Number(img.dataset.sent || 0) + 1);
    chain.then(() => { img.dataset.done = String(Number(img.dataset.done || 0) + 1); });
  };
  const at = (ev) => { const r = img.getBoundingClientRect(); return { x: Math.min(1, Math.max(0, (ev.clientX - r.left) / r.width)), y: Math.min(1, Math.max(0, (ev.clientY - r.top) / r.height)) }; };
  img.addEventListener('click', (ev) => { img.focus(); send({ type: 'click', ...at(ev) }); });
  img.addEventListener('wheel', (ev) => { ev.preventDefault(); send({ type: 'scroll', ...at(ev), dy: Math.max(-5000, Math.min(5000, ev.deltaY)) }); }, { passive: false });
  document.addEventListener('keydown', (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key.length === 1) { ev.preventDefault(); send({ type: 'text', text: ev.key }); }
    else if (keys.includes(ev.key)) { ev.preventDefault(); send({ type: 'key', key: ev.key }); }
  });
  document.addEventListener('paste', (ev) => { const t = ev.clipboardData && ev.clipboardData.getData('text'); if (t) { ev.preventDefault(); send({ type: 'text', text: t.slice(0, ${HOSTED_INPUT_TEXT_MAX_CHARS}) }); } });
})();
</script></body></html>`;
}

export async function hostedConnectRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const worker = workerOf(deps, (hook) => app.addHook('onClose', hook)); // created now (hooks cannot be added after boot)
  closeWithApp(app, deps);

  for (const merchant of HOSTED_MERCHANTS) {
    const camel = merchant === 'merchant-a' ? 'MerchantA' : 'MerchantB';
    defineRoute(app, deps, {
      method: 'POST',
      url: `/v1/cart/${merchant}/connect/start`,
      operationId: `start${camel}Connect`,
      summary: `Open a hosted browser on ${NAMES[merchant]}'s login page: the person logs in through live_view_url; finish stores the login as a connection`,
      tags: ['cart'],
      auth: 'api_key',
      scope: 'connections:write',
      bodyOptional: true,
      responses: { 200: StartResponse },
      errors: [[401, 'unauthorized'], [403, 'forbidden'], [502, 'browser_worker_failed'], [503, 'browser_worker_unavailable']],
      async handler(ctx) {
        const tenant = { orgId: ctx.auth.orgId, projectId: ctx.auth.projectId };
        if (!worker) throw new ApiError(503, 'browser_worker_unavailable', 'no browser worker is configured (BROWSER_WORKER=none); hosted connect cannot run here', { retriable: false });
        const site = deps.merchants[merchant];
        if (!site) throw new ApiError(503, 'browser_worker_unavailable', `no login page is configured for ${merchant}`, { retriable: false });
        const sessionId = newId('hcs', 24);
        let opened: { contextId: string; viewToken: string };
        try {
          opened = await openHosted(deps, worker, site, { tenant, merchant, sessionId }, async (contextId) => {
            await ctx.run(hostedConnectDecider, hostedConnectStream(sessionId), { type: 'start', data: { session_id: sessionId, context_id: contextId, merchant, org_id: tenant.orgId, project_id: tenant.projectId, created_at: deps.now().toISOString() } }, { expectedRevision: 'no_stream' });
          });
        } catch (err) {
          if (!(err instanceof HostedStartError)) throw err;
          await ctx
            .run(hostedConnectDecider, hostedConnectStream(sessionId), { type: 'fail_start', data: { session_id: sessionId, merchant, org_id: tenant.orgId, project_id: tenant.projectId, code: err.reason, detail: err.message.slice(0, 500) } }, { expectedRevision: 'no_stream' })
            .catch(() => {});
          throw new ApiError(502, 'browser_worker_failed', 'the browser worker refused or failed to open the merchant login page; retry to get a new session', { reason: err.reason, retriable: true });
        }
        const body = {
          merchant,
          context_id: opened.contextId,
          session_id: sessionId,
          live_view_url: `${deps.baseUrl}${LIVE_VIEW_PATH}/${opened.viewToken}`,
          ...(merchant === 'merchant-a' ? { checkout_supported: false as const, note: MERCHANT_A_NOTE } : {}),
        };
        return { status: 200, body, headers: { 'cache-control': 'no-store' } };
      },
    });

    defineRoute(app, deps, {
      method: 'POST',
      url: `/v1/cart/${merchant}/connect/finish`,
      operationId: `finish${camel}Connect`,
      summary: `Capture the person's logged-in ${NAMES[merchant]} session into the vault as a connection; the session id is spent and the browser closes`,
      tags: ['cart'],
      auth: 'api_key',
      scope: 'connections:write',
      body: z.object({ session_id: z.string().min(1).max(200) }),
      responses: { 200: FinishResponse },
      errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [409, 'not_logged_in'], [409, 'session_used'], [410, 'session_expired'], [503, 'vault_unavailable']],
      async handler(ctx) {
        const tenant = { orgId: ctx.auth.orgId, projectId: ctx.auth.projectId };
        const stream = hostedConnectStream(ctx.body.session_id);
        const s = ownSession((await loadState(deps.store, stream, hostedConnectDecider)).state, tenant, merchant);
        usable(s);
        const site = deps.merchants[merchant];
        const live = liveSession(deps, s.session_id);
        if (!live || !site) {
          await recordExpired(deps, tenant, s.session_id, 'context_lost');
          throw new Rejection('session_expired', 'the hosted browser session is no longer open (expired, or the service restarted); start a new one');
        }
        const claim = await claimForFinish(live, site);
        if (claim.state === 'busy') throw new Rejection('session_used', 'this session id is being used to finish a connect');
        if (claim.state === 'not_logged_in') throw new Rejection('not_logged_in', `the person has not logged in to ${merchant} yet: finish after they log in through the live view`);
        let connectionId: string;
        try {
          let ref: string;
          try {
            ref = await deps.vault.put(tenant.orgId, `connection:${merchant}`, encodeCredential({ storage_state: claim.storageState }));
          } catch (err) {
            throw new ApiError(503, 'vault_unavailable', 'the vault could not be written; nothing was stored', { retriable: true, reason: err instanceof Error ? err.constructor.name : 'error' });
          }
          const metadata = { source: 'hosted_browser', session_id: s.session_id, captured_at: deps.now().toISOString() };
          connectionId = await upsertConnection({ ports: deps, run: ctx.run.bind(ctx) }, tenant, merchant, null, ref, metadata, CONNECTION_AUTH_TYPE);
          await ctx.run(hostedConnectDecider, stream, { type: 'finish', tenant, merchant, connectionId }, { serialize: true });
        } catch (err) {
          releaseClaim(live);
          throw err;
        }
        await closeFinished(live);
        const connection = await readConnection(deps, tenant, connectionId);
        if (!connection) throw new Error('the connection just written is not readable');
        return { status: 200, body: { merchant, session_id: s.session_id, connection } };
      },
    });
  }

  defineRoute(app, deps, {
    method: 'GET',
    url: `${LIVE_VIEW_PATH}/:token`,
    operationId: 'hostedConnectLiveView',
    summary: "The live view (HTML for the person's browser): the merchant's page as a screencast; clicks and keys are forwarded to it. The unguessable token in the path is the credential",
    tags: ['cart'],
    auth: 'open',
    params: z.object({ token: z.string().max(200) }),
    responses: { 200: null },
    errors: [[404, 'not_found']],
    async handler({ params, req }) {
      const found = Token.safeParse(params.token).success ? liveView(deps, params.token, viewerCookieOf(req.headers.cookie), true) : undefined;
      if (!found) {
        // A person's browser gets a page that says what happened; any other client the envelope.
        if (!String(req.headers.accept ?? '').includes('text/html')) throw new ApiError(404, 'not_found', 'no open live view has this token');
        return { status: 404, body: endedPage(), headers: { 'content-type': 'text/html; charset=utf-8', ...pageSecurityHeaders() } };
      }
      const nonce = randomBytes(16).toString('base64');
      const cookie: Record<string, string> = found.setCookie ? { 'set-cookie': `${VIEWER_COOKIE}=${found.setCookie}; Path=${LIVE_VIEW_PATH}/${params.token}; HttpOnly; SameSite=Lax${deps.baseUrl.startsWith('https:') ? '; Secure' : ''}` } : {};
      return { status: 200, body: viewerPage(found.live.merchant, nonce), headers: { 'content-type': 'text/html; charset=utf-8', ...pageSecurityHeaders({ scriptNonce: nonce, dataImages: true, connectSelf: true }), ...cookie } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: `${LIVE_VIEW_PATH}/:token/frames`,
    operationId: 'hostedConnectLiveFrames',
    summary: 'Server-sent events of the live view: `frame` {seq, image (data: URL, JPEG), width, height, url, title} at once and on each change; `ended` when the browser closes',
    tags: ['cart'],
    auth: 'open',
    params: z.object({ token: z.string().max(200) }),
    responses: { 200: null },
    errors: [[404, 'not_found']],
    async handler(ctx) {
      const live = Token.safeParse(ctx.params.token).success ? liveView(deps, ctx.params.token, viewerCookieOf(ctx.req.headers.cookie))?.live : undefined;
      if (!live) throw new ApiError(404, 'not_found', 'no open live view has this token');
      const body = openViewerStream(live, (f) => ctx.reply.raw.on('close', f));
      return { status: 200, body, headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive', 'x-accel-buffering': 'no', 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer' } };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: `${LIVE_VIEW_PATH}/:token/input`,
    operationId: 'hostedConnectLiveInput',
    summary: 'One input of the person, forwarded to the remote page in order: a click or scroll at (x, y) as fractions of the frame, text, or a special key',
    tags: ['cart'],
    auth: 'open',
    params: z.object({ token: z.string().max(200) }),
    body: InputBody,
    responses: { 204: null },
    errors: [[400, 'invalid_body'], [404, 'not_found']],
    async handler(ctx) {
      const live = Token.safeParse(ctx.params.token).success ? liveView(deps, ctx.params.token, viewerCookieOf(ctx.req.headers.cookie))?.live : undefined;
      if (!live) throw new ApiError(404, 'not_found', 'no open live view has this token');
      await forwardInput(live, ctx.body).catch(() => {}); // a page mid-navigation may drop one input; the person sees it and retries
      return { status: 204, headers: { 'cache-control': 'no-store' } };
    },
  });
}
