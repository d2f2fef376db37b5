import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { HOSTED_MERCHANTS, type HostedMerchant } from '../../../events/hosted-connect.ts';
import { HOSTED_INPUT_TEXT_MAX_CHARS } from '../../limits.ts';
import { closeWithApp, liveView } from '../../usecases/hosted-browser.ts';
import { finishHostedConnect, LIVE_VIEW_PATH, returnUrlProblem, startHostedConnect } from '../../usecases/hosted-connect.ts';
import { forwardInput, openViewerStream, SPECIAL_KEYS, VIEW_BOUNDS, type SpecialKey } from '../../usecases/hosted-viewer.ts';
import { workerOf } from '../../usecases/signup-runner.ts';
import { browserInstance, orForwarded } from '../kernel/browser-forward.ts';
import { ConnectionView } from './connection-schemas.ts';
import { ApiError } from '../kernel/errors.ts';
import { endedPage, MERCHANT_NAMES as NAMES, viewerPage } from './hosted-connect-page.ts';
import { pageSecurityHeaders } from '../kernel/html.ts';
import { defineRoute, type AppDeps, type RunCommand } from '../kernel/route.ts';

// Hosted-browser connect (spec 4.16): the routes; start and finish are
// src/usecases/hosted-connect.ts, the live browser contexts
// src/usecases/hosted-browser.ts, the live view's HTML hosted-connect-page.ts.
// A context lives in the instance that started it: a finish or a live-view
// request reaching another instance is forwarded there (browser-forward.ts).

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
const X = Fraction.describe('Where, across the view: 0 (left edge) to 1 (right edge).');
const Y = Fraction.describe('Where, down the view: 0 (top) to 1 (bottom).');
const kind = <T extends string>(t: T, what: string) => z.literal(t).describe(what);
const InputBody = z.discriminatedUnion('type', [
  z.object({ type: kind('click', '`click`: a click at x, y.'), x: X, y: Y }),
  z.object({ type: kind('scroll', '`scroll`: the wheel at x, y.'), x: X, y: Y, dy: z.number().min(-5_000).max(5_000).describe('How far to scroll, in CSS pixels; negative scrolls up.') }),
  z.object({ type: kind('text', '`text`: type characters into the focused field.'), text: z.string().min(1).max(HOSTED_INPUT_TEXT_MAX_CHARS).describe('The characters to type.') }),
  z.object({ type: kind('key', '`key`: press one special key.'), key: z.enum(Object.keys(SPECIAL_KEYS) as [SpecialKey, ...SpecialKey[]]).describe('The key to press, by its name.') }),
  // The viewer's size (CSS px): the remote page is laid out at it.
  z.object({
    type: kind('resize', "`resize`: the viewer's size changed."),
    width: z.number().int().min(VIEW_BOUNDS.minWidth).max(VIEW_BOUNDS.maxWidth).describe("The viewer's width, in CSS pixels."),
    height: z.number().int().min(VIEW_BOUNDS.minHeight).max(VIEW_BOUNDS.maxHeight).describe("The viewer's height, in CSS pixels."),
  }),
]);
const StartBody = z.object({
  return_url: z
    .string()
    .max(2048)
    .superRefine((url, c) => {
      const problem = returnUrlProblem(url);
      if (problem) c.addIssue({ code: 'custom', message: problem });
    })
    .optional()
    // The rule returnUrlProblem enforces, stated for the reference (the check itself stays the URL parser's).
    .meta({
      pattern: '^(?:[Hh][Tt][Tt][Pp][Ss]://[^/@?#\\s]+|[Hh][Tt][Tt][Pp]://(?:[Ll][Oo][Cc][Aa][Ll][Hh][Oo][Ss][Tt]|127\\.0\\.0\\.1|\\[::1\\])(?::\\d+)?)(?:[/?#].*)?$',
      description: 'Where the live view offers to take the person once connected: https://…, or http:// on localhost, 127.0.0.1 or [::1]; no user name or password',
    }),
});

/** The cookie binding a live view to the browser that first opened it (Path: that live view only). */
const VIEWER_COOKIE = 'hosted_viewer';
function viewerCookieOf(header: string | undefined): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === VIEWER_COOKIE) return part.slice(i + 1).trim();
  }
  return undefined;
}

export async function hostedConnectRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const onClose = (hook: () => Promise<void>) => app.addHook('onClose', hook);
  const worker = workerOf(deps, onClose); // created now (hooks cannot be added after boot)
  closeWithApp(deps, onClose);
  await browserInstance(app, deps, worker);
  for (const merchant of HOSTED_MERCHANTS) merchantConnectRoutes(app, deps, worker, merchant);
  liveViewRoutes(app, deps);
}

const useCase = (deps: AppDeps, ctx: { auth: { orgId: string; projectId: string }; run: RunCommand }) => ({ ports: deps, tenant: { orgId: ctx.auth.orgId, projectId: ctx.auth.projectId }, run: ctx.run.bind(ctx) });

/** Start and finish of one merchant's hosted connect. */
function merchantConnectRoutes(app: FastifyInstance, deps: AppDeps, worker: ReturnType<typeof workerOf>, merchant: HostedMerchant): void {
  const camel = merchant === 'merchant-a' ? 'MerchantA' : 'MerchantB';
  defineRoute(app, deps, {
    method: 'POST',
    url: `/v1/cart/${merchant}/connect/start`,
    operationId: `start${camel}Connect`,
    summary: `Open a hosted browser on ${NAMES[merchant]}'s login page: the person logs in through live_view_url; finish stores the login as a connection`,
    tags: ['cart'],
    auth: 'api_key',
    scope: 'connections:write',
    body: StartBody,
    bodyOptional: true,
    responses: { 200: StartResponse },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [502, 'browser_worker_failed'], [503, 'browser_worker_unavailable'], [503, 'browser_capacity']],
    async handler(ctx) {
      return { status: 200, body: await startHostedConnect(useCase(deps, ctx), worker, merchant, { returnUrl: ctx.body.return_url }), headers: { 'cache-control': 'no-store' } };
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
      return orForwarded(deps, ctx.req, ctx.reply, async (mayForward) => ({ status: 200, body: await finishHostedConnect(useCase(deps, ctx), merchant, ctx.body.session_id, { mayForward }) }));
    },
  });
}

/** The live view behind an unguessable token, for the browser bound to it; not_found otherwise (OwnedElsewhere when another instance holds it). */
async function openLiveView(deps: AppDeps, token: string, cookieHeader: string | undefined, mayForward: boolean) {
  const live = Token.safeParse(token).success ? (await liveView(deps, token, viewerCookieOf(cookieHeader), { mayForward }))?.live : undefined;
  if (!live) throw new ApiError(404, 'not_found', 'no open live view has this token');
  return live;
}

/** The live view's page, its frames and the person's input. */
function liveViewRoutes(app: FastifyInstance, deps: AppDeps): void {
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
    handler: ({ params, req, reply }) => orForwarded(deps, req, reply, async (mayForward) => {
      const found = Token.safeParse(params.token).success ? await liveView(deps, params.token, viewerCookieOf(req.headers.cookie), { claim: true, mayForward }) : undefined;
      if (!found) {
        // A person's browser gets a page that says what happened; any other client the envelope.
        if (!String(req.headers.accept ?? '').includes('text/html')) throw new ApiError(404, 'not_found', 'no open live view has this token');
        return { status: 404, body: endedPage(), headers: { 'content-type': 'text/html; charset=utf-8', ...pageSecurityHeaders() } };
      }
      const nonce = randomBytes(16).toString('base64');
      const cookie: Record<string, string> = found.setCookie ? { 'set-cookie': `${VIEWER_COOKIE}=${found.setCookie}; Path=${LIVE_VIEW_PATH}/${params.token}; HttpOnly; SameSite=Lax${deps.baseUrl.startsWith('https:') ? '; Secure' : ''}` } : {};
      return { status: 200, body: viewerPage(found.live.merchant, nonce), headers: { 'content-type': 'text/html; charset=utf-8', ...pageSecurityHeaders({ scriptNonce: nonce, dataImages: true, connectSelf: true }), ...cookie } };
    }),
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
    handler: (ctx) =>
      orForwarded(deps, ctx.req, ctx.reply, async (mayForward) => {
        const live = await openLiveView(deps, ctx.params.token, ctx.req.headers.cookie, mayForward);
        const body = openViewerStream(live, (f) => ctx.reply.raw.on('close', f));
        return { status: 200, body, headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive', 'x-accel-buffering': 'no', 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer' } };
      }),
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: `${LIVE_VIEW_PATH}/:token/input`,
    operationId: 'hostedConnectLiveInput',
    summary: "One input of the person, forwarded to the remote page in order: a click or scroll at (x, y) as fractions of the frame, text, a special key, or the viewer's size (the remote page is laid out at it)",
    tags: ['cart'],
    auth: 'open',
    params: z.object({ token: z.string().max(200) }),
    body: InputBody,
    responses: { 204: null },
    errors: [[400, 'invalid_body'], [404, 'not_found']],
    handler: (ctx) =>
      orForwarded(deps, ctx.req, ctx.reply, async (mayForward) => {
        const live = await openLiveView(deps, ctx.params.token, ctx.req.headers.cookie, mayForward);
        await forwardInput(live, ctx.body).catch(() => {}); // a page mid-navigation may drop one input; the person sees it and retries
        return { status: 204, headers: { 'cache-control': 'no-store' } };
      }),
  });
}
