import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { CDPSession } from 'playwright-core';
import { hostedConnectDecider, hostedConnectStream } from '../../commands/hosted-connect.ts';
import type { Tenant } from '../../commands/consumer.ts';
import type { HostedMerchant } from '../../events/hosted-connect.ts';
import type { SlotState } from '../adapters/browser/slots.ts';
import { WorkerError, type BrowserSession, type BrowserWorker } from '../adapters/browser/worker.ts';
import type { MerchantSite } from '../adapters/merchants/sites.ts';
import { handleCommand } from '../eventstore/handler.ts';
import { HOSTED_CONNECT_IDLE_MS, HOSTED_CONNECT_MAX_MS, HOSTED_CONNECT_QUEUE_WAIT_MS } from '../limits.ts';
import { checkOwner, claim, release, releaseAll } from './browser-owners.ts';
import type { Ports } from './context.ts';
import { startScreencast, type Live } from './hosted-viewer.ts';

// The open browser contexts of hosted-browser connect (spec 4.16), held in this
// process like the paused pages of signup runs: a worker context on the
// merchant's login page, a DevTools-protocol screencast of it (Page.startScreencast
// → the latest JPEG frame, pushed to live-view viewers over SSE: see
// hosted-viewer.ts, with the person's clicks and keys). A context closes on
// finish, HOSTED_CONNECT_IDLE_MS after its last viewer left (or after it opened
// with nobody watching) with no input since, after HOSTED_CONNECT_MAX_MS in
// all, with the app, and when an organization under its share needs it while
// nobody watches it and its own organization holds more than its share
// (reclaimed: src/adapters/browser/slots.ts). A start that finds no context
// free waits up to HOSTED_CONNECT_QUEUE_WAIT_MS for one. Other instances reach
// it through the claims in browser_owners (browser-owners.ts). The live-view
// token is kept only as its SHA-256.

const byId = new Map<string, Live>();
const byView = new Map<string, Live>();
const closeHooked = new WeakSet<Ports>();

/** Tunables tests may shrink (idle deadline, lifetime). */
export const hostedConfig = { idleMs: HOSTED_CONNECT_IDLE_MS, maxMs: HOSTED_CONNECT_MAX_MS, navigationMs: 30_000, queueWaitMs: HOSTED_CONNECT_QUEUE_WAIT_MS };

const viewKeyOf = (token: string) => createHash('sha256').update(token).digest('hex');
const sessionKey = (sessionId: string) => `hosted:${sessionId}`;
const viewOwnerKey = (viewKey: string) => `view:${viewKey}`;

/** Closes this app's contexts when it closes (`onClose` registers the hook while the app boots). */
export function closeWithApp(deps: Ports, onClose: (hook: () => Promise<void>) => void): void {
  if (closeHooked.has(deps)) return;
  closeHooked.add(deps);
  onClose(async () => {
    // No event here: the log may be closing too. A later finish finds no context and records `context_lost`.
    for (const live of [...byId.values()]) if (live.deps === deps) await end(live, 'app_closed');
    await releaseAll(deps);
  });
}

export class HostedStartError extends Error {
  constructor(
    readonly reason: 'capacity' | 'worker_unavailable' | 'navigation_failed',
    message: string,
    /** For `capacity`: the organization's holdings and when a context frees. */
    readonly slots?: SlotState,
  ) {
    super(message);
  }
}

const firstLine = (err: unknown) => ((err as Error)?.message ?? String(err)).split('\n')[0]!.slice(0, 300);

/**
 * Opens a worker context on the merchant's login page and starts its
 * screencast. Throws HostedStartError (the caller answers 502) after closing
 * whatever it opened; `register` runs before the context is published (the
 * started event), and the context is dropped if it throws.
 */
export async function openHosted(deps: Ports, worker: BrowserWorker, site: MerchantSite, a: { tenant: Tenant; merchant: HostedMerchant; sessionId: string; returnUrl?: string | undefined }, register: (contextId: string) => Promise<void>): Promise<{ contextId: string; viewToken: string }> {
  let session: BrowserSession;
  try {
    session = await worker.open({ org: a.tenant.orgId, wait: { signal: AbortSignal.timeout(hostedConfig.queueWaitMs) } });
  } catch (err) {
    if (err instanceof WorkerError && err.code === 'capacity') throw new HostedStartError('capacity', firstLine(err), err.slots);
    throw new HostedStartError('worker_unavailable', firstLine(err));
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
  const viewKey = viewKeyOf(viewToken);
  const live: Live = {
    deps,
    tenant: a.tenant,
    merchant: a.merchant,
    sessionId: a.sessionId,
    contextId: session.id,
    session,
    cdp,
    viewKey,
    viewerKey: undefined,
    frame: undefined,
    title: '',
    viewers: new Set(),
    state: 'open',
    inputs: Promise.resolve(),
    idle: undefined,
    lifetime: setTimeout(() => void expire(live, 'lifetime'), hostedConfig.maxMs),
    endsAt: Date.now() + hostedConfig.maxMs,
    returnUrl: a.returnUrl,
    keys: [sessionKey(a.sessionId), viewOwnerKey(viewKey)],
    touch: () => touch(live),
  };
  live.lifetime.unref();
  try {
    await claim(deps, live.keys); // before the session is published: any instance finds it from the first request on
    await register(session.id);
  } catch (err) {
    clearTimeout(live.lifetime);
    await release(deps, live.keys);
    await session.close();
    throw err;
  }
  byId.set(a.sessionId, live);
  byView.set(live.viewKey, live);
  touch(live);
  await startScreencast(live);
  return { contextId: session.id, viewToken };
}

/**
 * Something happened (a viewer came or went, an input arrived): while anyone
 * watches the context stays open; with nobody watching it closes
 * HOSTED_CONNECT_IDLE_MS after the last of these.
 */
export function touch(live: Live): void {
  clearTimeout(live.idle);
  live.idle = undefined;
  const unused = live.viewers.size === 0 && live.state === 'open';
  // Nobody watching: it may be taken back for an organization under its share, and it frees by the idle deadline at the latest.
  live.session.reclaimable(unused ? () => expire(live, 'reclaimed') : undefined);
  live.session.freesBy(new Date(unused ? Math.min(Date.now() + hostedConfig.idleMs, live.endsAt) : live.endsAt));
  if (live.viewers.size > 0 || live.state === 'ended') return;
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
  // Finished: the view says the person is connected (and where to go back to).
  const ended = why === 'finished' ? { reason: why, connected: true, ...(live.returnUrl ? { return_url: live.returnUrl } : {}) } : { reason: why };
  for (const v of live.viewers) v('ended', ended);
  live.viewers.clear();
  await live.cdp.send('Page.stopScreencast').catch(() => {});
  await live.session.close();
  await release(live.deps, live.keys);
}

async function expire(live: Live, reason: 'idle' | 'lifetime' | 'reclaimed'): Promise<void> {
  if (live.state !== 'open') return; // a finish in progress owns the context
  await end(live, reason);
  await recordExpired(live.deps, live.tenant, live.sessionId, reason);
}

export async function recordExpired(deps: Ports, tenant: Tenant, sessionId: string, reason: 'idle' | 'lifetime' | 'reclaimed' | 'context_lost'): Promise<void> {
  const cctx = { orgId: tenant.orgId, projectId: tenant.projectId, actor: { kind: 'system' as const, id: 'hosted-connect' }, requestId: null, now: deps.now };
  const r = await handleCommand(deps.store, hostedConnectDecider, hostedConnectStream(sessionId), { type: 'expire', reason }, cctx, { serialize: true }).catch(() => undefined);
  if (r?.lastPosition) await deps.readSide.waitFor(r.lastPosition, deps.readWaitMs).catch(() => {});
}

/** The open context of a session in this process (undefined after a restart, expiry or finish). */
export function liveSession(deps: Ports, sessionId: string): Live | undefined {
  const l = byId.get(sessionId);
  return l && l.deps === deps && l.state !== 'ended' ? l : undefined;
}

/** Throws OwnedElsewhere when another instance holds this session's context (see checkOwner). */
export const checkSessionOwner = (deps: Ports, sessionId: string, mayForward: boolean) => checkOwner(deps, sessionKey(sessionId), mayForward);

/**
 * The open context a live-view token opens, for the browser holding `viewerCookie`.
 * The first browser to open the page (`claim`) binds the live view to itself: a
 * copy of the URL opened anywhere else later is refused as if it did not exist.
 * Returns the cookie value to set when this call bound the view. Throws
 * OwnedElsewhere when another instance holds the context.
 */
export async function liveView(deps: Ports, token: string, viewerCookie: string | undefined, opts: { claim?: boolean; mayForward: boolean }): Promise<{ live: Live; setCookie: string | undefined } | undefined> {
  const key = viewKeyOf(token);
  const l = byView.get(key);
  if (!l || l.deps !== deps || l.state === 'ended') {
    await checkOwner(deps, viewOwnerKey(key), opts.mayForward);
    return undefined;
  }
  if (l.viewerKey === undefined) {
    if (!opts.claim) return undefined;
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
  live.session.reclaimable(undefined); // in use: a finish owns it
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
