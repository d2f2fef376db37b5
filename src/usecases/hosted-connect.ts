import { hostedConnectDecider, hostedConnectStream, ownSession, usable } from '../../commands/hosted-connect.ts';
import type { HostedMerchant } from '../../events/hosted-connect.ts';
import type { SlotState } from '../adapters/browser/slots.ts';
import type { BrowserWorker } from '../adapters/browser/worker.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import { newId } from '../ids.ts';
import { encodeCredential } from '../providers/credentials.ts';
import type { UseCaseCtx } from './context.ts';
import { readConnection, upsertConnection, type ConnectionRow } from './connections.ts';
import { checkSessionOwner, claimForFinish, closeFinished, hostedConfig, HostedStartError, liveSession, openHosted, recordExpired, releaseClaim } from './hosted-browser.ts';

// Hosted-browser connect (spec 4.16): start opens a browser-worker context on
// the merchant's login page (src/usecases/hosted-browser.ts keeps it live);
// finish captures the logged-in state into the vault as a connection
// (auth_type `browser_session`). The session id is single use and bound to the
// organization and project that started it. `browser_worker_failed` (502) when
// the worker refused or failed (a retry mints a new context and session),
// `browser_worker_unavailable` (503) when none is configured, `browser_capacity`
// (503, Retry-After) when no context freed within the bounded wait
// (hostedConfig.queueWaitMs). The context lives
// in the instance that started it; a finish reaching another instance throws
// OwnedElsewhere there, and that instance's route forwards it (browser-owners.ts).

export const MERCHANT_A_NOTE = 'Checkout is not supported for merchant-a yet; your login is stored for later use.';
export const LIVE_VIEW_PATH = '/connect/live';
const CONNECTION_AUTH_TYPE = 'browser_session';

type HostedCtx = Pick<UseCaseCtx, 'ports' | 'tenant' | 'run'>;

export type HostedStart = { merchant: HostedMerchant; context_id: string; session_id: string; live_view_url: string; checkout_supported?: false; note?: string };

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * Why `url` cannot be a return_url (undefined: it can): https, or http on
 * loopback (a local app), with no credentials in it; never javascript:, data:
 * or any other scheme, since the live view links to it.
 */
export function returnUrlProblem(url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'return_url is not an absolute URL: give https://… (or http://localhost:…)';
  }
  if (u.username || u.password) return 'return_url must not carry a user name or password';
  if (u.protocol === 'https:') return undefined;
  if (u.protocol === 'http:' && LOOPBACK_HOSTS.has(u.hostname)) return undefined;
  return 'return_url must be an https:// URL, or http:// on localhost, 127.0.0.1 or [::1]';
}

/** Opens a hosted browser on the merchant's login page: the ids and the live-view URL. `returnUrl` (checked with returnUrlProblem) is offered to the person once connected. */
export async function startHostedConnect(ctx: HostedCtx, worker: BrowserWorker | undefined, merchant: HostedMerchant, opts: { returnUrl?: string | undefined } = {}): Promise<HostedStart> {
  const { ports, tenant } = ctx;
  if (!worker) throw new Rejection('browser_worker_unavailable', 'no browser worker is configured (BROWSER_WORKER=none); hosted connect cannot run here', { retriable: false });
  const site = ports.merchants[merchant];
  if (!site) throw new Rejection('browser_worker_unavailable', `no login page is configured for ${merchant}`, { retriable: false });
  const problem = opts.returnUrl === undefined ? undefined : returnUrlProblem(opts.returnUrl);
  if (problem) throw new Rejection('invalid_body', problem, { issues: [{ path: ['return_url'], code: 'invalid_url', message: problem }] });
  const sessionId = newId('hcs', 24);
  let opened: { contextId: string; viewToken: string };
  try {
    opened = await openHosted(ports, worker, site, { tenant, merchant, sessionId, returnUrl: opts.returnUrl }, async (contextId) => {
      await ctx.run(hostedConnectDecider, hostedConnectStream(sessionId), { type: 'start', data: { session_id: sessionId, context_id: contextId, merchant, org_id: tenant.orgId, project_id: tenant.projectId, created_at: ports.now().toISOString() } }, { expectedRevision: 'no_stream' });
    });
  } catch (err) {
    if (!(err instanceof HostedStartError)) throw err;
    if (err.reason === 'capacity') throw capacityRejection(err.slots, ports.now()); // nothing opened: no session to record
    await ctx
      .run(hostedConnectDecider, hostedConnectStream(sessionId), { type: 'fail_start', data: { session_id: sessionId, merchant, org_id: tenant.orgId, project_id: tenant.projectId, code: err.reason, detail: err.message.slice(0, 500) } }, { expectedRevision: 'no_stream' })
      .catch(() => {});
    throw new Rejection('browser_worker_failed', 'the browser worker refused or failed to open the merchant login page; retry to get a new session', { reason: err.reason, retriable: true });
  }
  return {
    merchant,
    context_id: opened.contextId,
    session_id: sessionId,
    live_view_url: `${ports.baseUrl}${LIVE_VIEW_PATH}/${opened.viewToken}`,
    ...(merchant === 'merchant-a' ? { checkout_supported: false as const, note: MERCHANT_A_NOTE } : {}),
  };
}

/** 503 `browser_capacity`: how many contexts the organization holds, its share, and when one frees here (Retry-After). */
function capacityRejection(slots: SlotState | undefined, now: Date): Rejection {
  const waitedS = Math.round(hostedConfig.queueWaitMs / 1000);
  const freesInMs = slots?.freesBy ? Math.max(0, slots.freesBy.getTime() - now.getTime()) : hostedConfig.idleMs;
  const retryAfterS = Math.min(Math.max(1, Math.ceil(freesInMs / 1000)), Math.ceil(hostedConfig.maxMs / 1000));
  const held = slots ? `this organization holds ${slots.held} browser context${slots.held === 1 ? '' : 's'} (${slots.heldHere} on this instance; its share is ${slots.share} when others wait, of ${slots.maxContexts} per instance)` : 'this organization holds none';
  const frees = slots?.freesBy ? `the next one here frees by ${slots.freesBy.toISOString()} at the latest (an unwatched live view closes ${Math.round(hostedConfig.idleMs / 1000)} s after its last use)` : 'contexts free as live views finish or go unwatched';
  return new Rejection('browser_capacity', `every browser context is in use and none freed within ${waitedS} s: ${held}; ${frees}. Retry after ${retryAfterS} s, or finish or close a live view you no longer need.`, {
    reason: 'capacity',
    retriable: true,
    retry_after_seconds: retryAfterS,
    contexts_held: slots?.held ?? 0,
    contexts_share: slots?.share ?? 0,
    ...(slots?.freesBy ? { frees_by: slots.freesBy.toISOString() } : {}),
  });
}

/**
 * Captures the person's logged-in session into the vault as a connection; the
 * session id is spent and the browser closes. Throws OwnedElsewhere when
 * another instance holds the context and `mayForward` (not a forwarded request).
 */
export async function finishHostedConnect(ctx: HostedCtx, merchant: HostedMerchant, sessionId: string, opts: { mayForward: boolean }): Promise<{ merchant: HostedMerchant; session_id: string; connection: ConnectionRow }> {
  const { ports, tenant } = ctx;
  const stream = hostedConnectStream(sessionId);
  const s = ownSession((await loadState(ports.store, stream, hostedConnectDecider)).state, tenant, merchant);
  usable(s);
  const site = ports.merchants[merchant];
  const live = liveSession(ports, s.session_id);
  if (!live || !site) {
    if (site) await checkSessionOwner(ports, s.session_id, opts.mayForward);
    await recordExpired(ports, tenant, s.session_id, 'context_lost');
    throw new Rejection('session_expired', 'the hosted browser session is no longer open (expired, or the service restarted); start a new one');
  }
  const claim = await claimForFinish(live, site);
  if (claim.state === 'busy') throw new Rejection('session_used', 'this session id is being used to finish a connect');
  if (claim.state === 'not_logged_in') throw new Rejection('not_logged_in', `the person has not logged in to ${merchant} yet: finish after they log in through the live view`);
  let connectionId: string;
  try {
    let ref: string;
    try {
      ref = await ports.vault.put(tenant.orgId, `connection:${merchant}`, encodeCredential({ storage_state: claim.storageState }));
    } catch (err) {
      throw new Rejection('vault_unavailable', 'the vault could not be written; nothing was stored', { retriable: true, reason: err instanceof Error ? err.constructor.name : 'error' });
    }
    const metadata = { source: 'hosted_browser', session_id: s.session_id, captured_at: ports.now().toISOString() };
    connectionId = await upsertConnection(ctx, tenant, merchant, null, ref, metadata, CONNECTION_AUTH_TYPE);
    await ctx.run(hostedConnectDecider, stream, { type: 'finish', tenant, merchant, connectionId }, { serialize: true });
  } catch (err) {
    releaseClaim(live);
    throw err;
  }
  await closeFinished(live);
  const connection = await readConnection(ports, tenant, connectionId);
  if (!connection) throw new Error('the connection just written is not readable');
  return { merchant, session_id: s.session_id, connection };
}
