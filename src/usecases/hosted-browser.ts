import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { PassThrough } from 'node:stream';
import type { CDPSession } from 'playwright-core';
import { hostedConnectDecider, hostedConnectStream } from '../../commands/hosted-connect.ts';
import type { Tenant } from '../../commands/consumer.ts';
import type { HostedMerchant } from '../../events/hosted-connect.ts';
import { WorkerError, type BrowserSession, type BrowserWorker } from '../adapters/browser/worker.ts';
import type { MerchantSite } from '../adapters/merchants/sites.ts';
import { handleCommand } from '../eventstore/handler.ts';
import { HOSTED_CONNECT_IDLE_MS, HOSTED_CONNECT_MAX_MS } from '../limits.ts';
import type { Ports } from './context.ts';

// The open browser contexts of hosted-browser connect (spec 4.16), held in this
// process like the paused pages of signup runs: a worker context on the
// merchant's login page, a DevTools-protocol screencast of it (Page.startScreencast
// → the latest JPEG frame, pushed to live-view viewers over SSE), and the
// person's clicks and keys forwarded with Input.dispatchMouseEvent /
// Input.insertText / Input.dispatchKeyEvent. A context closes on finish, after
// HOSTED_CONNECT_IDLE_MS without a viewer or input, after HOSTED_CONNECT_MAX_MS
// in all, and with the app. The live-view token is kept only as its SHA-256.

export type Frame = { seq: number; image: string; width: number; height: number; url: string; title: string };
type Viewer = (event: 'frame' | 'ended', data: unknown) => void;

type Live = {
  deps: Ports;
  tenant: Tenant;
  merchant: HostedMerchant;
  sessionId: string;
  contextId: string;
  session: BrowserSession;
  cdp: CDPSession;
  viewKey: string;
  /** SHA-256 of the cookie of the browser that first opened the live view: only that browser may watch and type. */
  viewerKey: string | undefined;
  frame: Frame | undefined;
  title: string;
  viewers: Set<Viewer>;
  state: 'open' | 'finishing' | 'ended';
  inputs: Promise<void>;
  idle: NodeJS.Timeout | undefined;
  lifetime: NodeJS.Timeout;
};

const byId = new Map<string, Live>();
const byView = new Map<string, Live>();
const closeHooked = new WeakSet<Ports>();

/** Tunables tests may shrink (idle deadline, lifetime). */
export const hostedConfig = { idleMs: HOSTED_CONNECT_IDLE_MS, maxMs: HOSTED_CONNECT_MAX_MS, navigationMs: 30_000 };

const viewKeyOf = (token: string) => createHash('sha256').update(token).digest('hex');

/** Closes this app's contexts when it closes (`onClose` registers the hook while the app boots). */
export function closeWithApp(deps: Ports, onClose: (hook: () => Promise<void>) => void): void {
  if (closeHooked.has(deps)) return;
  closeHooked.add(deps);
  onClose(async () => {
    // No event here: the log may be closing too. A later finish finds no context and records `context_lost`.
    for (const live of [...byId.values()]) if (live.deps === deps) await end(live, 'app_closed');
  });
}

export class HostedStartError extends Error {
  constructor(
    readonly reason: 'capacity' | 'worker_unavailable' | 'navigation_failed',
    message: string,
  ) {
    super(message);
  }
}

const firstLine = (err: unknown) => ((err as Error)?.message ?? String(err)).split('\n')[0]!.slice(0, 300);

/** How long a title lookup may take before the last known title stands (a page stuck in a dialog). */
const TITLE_READ_MS = 10_000;

function withTimeout<T>(p: Promise<T>, ms: number, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<T>((r) => (timer = setTimeout(() => r(fallback), ms)))]).finally(() => clearTimeout(timer));
}

/**
 * Opens a worker context on the merchant's login page and starts its
 * screencast. Throws HostedStartError (the caller answers 502) after closing
 * whatever it opened; `register` runs before the context is published (the
 * started event), and the context is dropped if it throws.
 */
export async function openHosted(deps: Ports, worker: BrowserWorker, site: MerchantSite, a: { tenant: Tenant; merchant: HostedMerchant; sessionId: string }, register: (contextId: string) => Promise<void>): Promise<{ contextId: string; viewToken: string }> {
  let session: BrowserSession;
  try {
    session = await worker.open();
  } catch (err) {
    throw new HostedStartError(err instanceof WorkerError && err.code === 'capacity' ? 'capacity' : 'worker_unavailable', firstLine(err));
  }
  let cdp: CDPSession;
  try {
    const res = await session.page.goto(site.loginUrl, { timeout: hostedConfig.navigationMs, waitUntil: 'load' });
    if (res && res.status() >= 400) throw new Error(`the login page answered ${res.status()}`);
    cdp = await session.context.newCDPSession(session.page);
  } catch (err) {
    await session.close();
    throw new HostedStartError('navigation_failed', firstLine(err));
  }
  const viewToken = randomBytes(32).toString('base64url');
  const live: Live = {
    deps,
    tenant: a.tenant,
    merchant: a.merchant,
    sessionId: a.sessionId,
    contextId: session.id,
    session,
    cdp,
    viewKey: viewKeyOf(viewToken),
    viewerKey: undefined,
    frame: undefined,
    title: '',
    viewers: new Set(),
    state: 'open',
    inputs: Promise.resolve(),
    idle: undefined,
    lifetime: setTimeout(() => void expire(live, 'lifetime'), hostedConfig.maxMs),
  };
  live.lifetime.unref();
  try {
    await register(session.id);
  } catch (err) {
    clearTimeout(live.lifetime);
    await session.close();
    throw err;
  }
  byId.set(a.sessionId, live);
  byView.set(live.viewKey, live);
  touch(live);
  let seq = 0;
  // A frame goes out at once, with the title known so far; the page's title is
  // then read behind it and, if it changed (a navigation), the latest frame goes
  // out again with it. A slow title lookup (a busy machine) never holds a frame
  // back, and never leaves the view on a stale title when no later frame comes.
  let titleRead: Promise<void> | undefined;
  let titleAgain = false;
  const refreshTitle = (): void => {
    if (titleRead) {
      titleAgain = true;
      return;
    }
    titleRead = (async () => {
      do {
        titleAgain = false;
        const title = await withTimeout(session.page.title().catch(() => live.title), TITLE_READ_MS, live.title);
        if (title !== live.title) {
          live.title = title;
          if (live.frame) publish(live, { ...live.frame, seq: ++seq, url: session.page.url(), title });
        }
      } while (titleAgain && live.state !== 'ended');
    })().finally(() => (titleRead = undefined));
  };
  cdp.on('Page.screencastFrame', (f: { data: string; sessionId: number; metadata: { deviceWidth?: number; deviceHeight?: number } }) => {
    void cdp.send('Page.screencastFrameAck', { sessionId: f.sessionId }).catch(() => {});
    const vp = session.page.viewportSize();
    publish(live, { seq: ++seq, image: `data:image/jpeg;base64,${f.data}`, width: f.metadata.deviceWidth ?? vp?.width ?? 1280, height: f.metadata.deviceHeight ?? vp?.height ?? 720, url: session.page.url(), title: live.title });
    refreshTitle();
  });
  const vp = session.page.viewportSize() ?? { width: 1280, height: 720 };
  await cdp.send('Page.startScreencast', { format: 'jpeg', quality: 70, maxWidth: vp.width, maxHeight: vp.height, everyNthFrame: 1 }).catch(() => {});
  return { contextId: session.id, viewToken };
}

function publish(live: Live, f: Frame): void {
  if (live.state === 'ended') return;
  if (live.frame && live.frame.seq > f.seq) return; // a late title lookup must not replace a newer frame
  live.frame = f;
  for (const v of live.viewers) v('frame', f);
}

/** Pushes the idle deadline back (a viewer connected, an input arrived). */
function touch(live: Live): void {
  clearTimeout(live.idle);
  live.idle = setTimeout(() => void expire(live, 'idle'), hostedConfig.idleMs);
  live.idle.unref();
}

async function end(live: Live, why: string): Promise<void> {
  if (live.state === 'ended') return;
  live.state = 'ended';
  clearTimeout(live.idle);
  clearTimeout(live.lifetime);
  byId.delete(live.sessionId);
  byView.delete(live.viewKey);
  for (const v of live.viewers) v('ended', { reason: why });
  live.viewers.clear();
  await live.cdp.send('Page.stopScreencast').catch(() => {});
  await live.session.close();
}

async function expire(live: Live, reason: 'idle' | 'lifetime'): Promise<void> {
  if (live.state !== 'open') return; // a finish in progress owns the context
  await end(live, reason);
  await recordExpired(live.deps, live.tenant, live.sessionId, reason);
}

export async function recordExpired(deps: Ports, tenant: Tenant, sessionId: string, reason: 'idle' | 'lifetime' | 'context_lost'): Promise<void> {
  const cctx = { orgId: tenant.orgId, projectId: tenant.projectId, actor: { kind: 'system' as const, id: 'hosted-connect' }, requestId: null, now: deps.now };
  const r = await handleCommand(deps.store, hostedConnectDecider, hostedConnectStream(sessionId), { type: 'expire', reason }, cctx, { serialize: true }).catch(() => undefined);
  if (r?.lastPosition) await deps.readSide.waitFor(r.lastPosition, deps.readWaitMs).catch(() => {});
}

/** The open context of a session in this process (undefined after a restart, expiry or finish). */
export function liveSession(deps: Ports, sessionId: string): Live | undefined {
  const l = byId.get(sessionId);
  return l && l.deps === deps && l.state !== 'ended' ? l : undefined;
}

/**
 * The open context a live-view token opens, for the browser holding `viewerCookie`.
 * The first browser to open the page (`claim`) binds the live view to itself: a
 * copy of the URL opened anywhere else later is refused as if it did not exist.
 * Returns the cookie value to set when this call bound the view.
 */
export function liveView(deps: Ports, token: string, viewerCookie: string | undefined, claim = false): { live: Live; setCookie: string | undefined } | undefined {
  const l = byView.get(viewKeyOf(token));
  if (!l || l.deps !== deps || l.state === 'ended') return undefined;
  if (l.viewerKey === undefined) {
    if (!claim) return undefined;
    const secret = randomBytes(32).toString('base64url');
    l.viewerKey = viewKeyOf(secret);
    return { live: l, setCookie: secret };
  }
  if (!viewerCookie || !sameKey(viewKeyOf(viewerCookie), l.viewerKey)) return undefined;
  return { live: l, setCookie: undefined };
}

const sameKey = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

/**
 * The finish step on the in-process side: refuses (`not_logged_in`) unless the
 * context holds the merchant's session cookie, then returns the context's
 * storage state (cookies, local storage) as JSON. The context stays claimed
 * (`finishing`) until `release` (refusal, failure) or `close` (done).
 */
export async function claimForFinish(live: Live, site: MerchantSite): Promise<{ state: 'not_logged_in' } | { state: 'busy' } | { state: 'captured'; storageState: string }> {
  if (live.state !== 'open') return { state: 'busy' };
  live.state = 'finishing';
  try {
    const cookies = await live.session.context.cookies(site.loginUrl);
    if (!cookies.some((c) => c.name === site.sessionCookie && c.value !== '')) {
      live.state = 'open';
      touch(live);
      return { state: 'not_logged_in' };
    }
    return { state: 'captured', storageState: JSON.stringify(await live.session.context.storageState()) };
  } catch (err) {
    live.state = 'open';
    throw err;
  }
}

export function releaseClaim(live: Live): void {
  if (live.state !== 'finishing') return;
  live.state = 'open';
  touch(live);
}

export async function closeFinished(live: Live): Promise<void> {
  await end(live, 'finished');
}

/** A live-view SSE stream: the latest frame at once, then each new one; `ended` when the context closes. */
export function openViewerStream(live: Live, onClose: (f: () => void) => void): PassThrough {
  const out = new PassThrough();
  let done = false;
  const viewer: Viewer = (event, data) => {
    if (done) return;
    out.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    if (event === 'ended') stop();
  };
  const heartbeat = setInterval(() => {
    if (!done) out.write(': heartbeat\n\n');
    if (live.viewers.has(viewer)) touch(live); // a watching person keeps the context alive
  }, 15_000);
  const stop = () => {
    if (done) return;
    done = true;
    clearInterval(heartbeat);
    live.viewers.delete(viewer);
    out.end();
  };
  live.viewers.add(viewer);
  touch(live);
  onClose(stop);
  out.write(': open\n\n');
  if (live.frame) viewer('frame', live.frame);
  else
    void (async () => {
      // No screencast frame yet (nothing painted since start): one screenshot stands in.
      const shot = (await live.cdp.send('Page.captureScreenshot', { format: 'jpeg', quality: 70 }).catch(() => undefined)) as { data: string } | undefined;
      const vp = live.session.page.viewportSize() ?? { width: 1280, height: 720 };
      if (shot && !live.frame) publish(live, { seq: 0, image: `data:image/jpeg;base64,${shot.data}`, width: vp.width, height: vp.height, url: live.session.page.url(), title: await withTimeout(live.session.page.title().catch(() => ''), 1_000, '') });
    })();
  return out;
}

export const SPECIAL_KEYS = {
  Enter: { code: 'Enter', vk: 13, text: '\r' },
  Tab: { code: 'Tab', vk: 9, text: undefined },
  Backspace: { code: 'Backspace', vk: 8, text: undefined },
  Delete: { code: 'Delete', vk: 46, text: undefined },
  Escape: { code: 'Escape', vk: 27, text: undefined },
  ArrowLeft: { code: 'ArrowLeft', vk: 37, text: undefined },
  ArrowUp: { code: 'ArrowUp', vk: 38, text: undefined },
  ArrowRight: { code: 'ArrowRight', vk: 39, text: undefined },
  ArrowDown: { code: 'ArrowDown', vk: 40, text: undefined },
  Home: { code: 'Home', vk: 36, text: undefined },
  End: { code: 'End', vk: 35, text: undefined },
} as const;
export type SpecialKey = keyof typeof SPECIAL_KEYS;

export type Input = { type: 'click'; x: number; y: number } | { type: 'scroll'; x: number; y: number; dy: number } | { type: 'text'; text: string } | { type: 'key'; key: SpecialKey };

/** Forwards one input to the remote page, in arrival order (x, y are fractions of the frame). */
export function forwardInput(live: Live, input: Input): Promise<void> {
  touch(live);
  const run = async () => {
    if (live.state === 'ended') return;
    const vp = live.session.page.viewportSize() ?? { width: 1280, height: 720 };
    const w = live.frame?.width ?? vp.width;
    const h = live.frame?.height ?? vp.height;
    const send = (method: string, params: Record<string, unknown>) => live.cdp.send(method as 'Input.dispatchMouseEvent', params as never);
    switch (input.type) {
      case 'click': {
        const at = { x: Math.round(input.x * w), y: Math.round(input.y * h) };
        await send('Input.dispatchMouseEvent', { type: 'mouseMoved', ...at });
        await send('Input.dispatchMouseEvent', { type: 'mousePressed', ...at, button: 'left', buttons: 1, clickCount: 1 });
        await send('Input.dispatchMouseEvent', { type: 'mouseReleased', ...at, button: 'left', buttons: 0, clickCount: 1 });
        return;
      }
      case 'scroll':
        await send('Input.dispatchMouseEvent', { type: 'mouseWheel', x: Math.round(input.x * w), y: Math.round(input.y * h), deltaX: 0, deltaY: input.dy });
        return;
      case 'text':
        await send('Input.insertText', { text: input.text });
        return;
      case 'key': {
        const k = SPECIAL_KEYS[input.key];
        const base = { key: input.key, code: k.code, windowsVirtualKeyCode: k.vk, nativeVirtualKeyCode: k.vk };
        await send('Input.dispatchKeyEvent', { type: k.text ? 'keyDown' : 'rawKeyDown', ...base, ...(k.text ? { text: k.text, unmodifiedText: k.text } : {}) });
        await send('Input.dispatchKeyEvent', { type: 'keyUp', ...base });
        return;
      }
    }
  };
  const p = live.inputs.then(run, run);
  live.inputs = p.catch(() => {});
  return p;
}
