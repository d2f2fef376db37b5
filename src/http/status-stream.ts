import { PassThrough } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Tenant } from '../../commands/consumer.ts';
import { defineRoute, type AppDeps } from './route.ts';
import { tenantOf } from './sessions.ts';
import { canonicalToolCallId, malformedId, notVisible, readStatusRow, statusView, type StatusKind } from './tool-calls.ts';

// Server-sent event streams of the payment and verification views (spec 6
// Streams, 8 Limits): `snapshot` first, an `update` per change, `done` after a
// terminal status; a `:` heartbeat comment every 15 s; the server closes 5 s
// after a terminal status, or after 30 minutes. Each event carries an `id:`,
// the number of status changes it reflects; a reconnect with Last-Event-ID = k
// gets the changes after the k-th and no snapshot, so nothing is lost or
// repeated. The stream polls the read model (fed from the log), so a change
// written through any app instance on the same database reaches it.
//
// Terminal statuses: verification approved, rejected, expired (spec); payment
// succeeded, failed and refunded (the spec leaves them open; the product's
// client stops at succeeded). A refund after a success is still recorded: the
// polled view and a new stream show it. A change that lands in the 5 s before
// the close is still sent, and `done` carries the latest status.

export const TERMINAL: Record<StatusKind, ReadonlySet<string>> = {
  payment: new Set(['succeeded', 'failed', 'refunded']),
  verification: new Set(['approved', 'rejected', 'expired']),
};

export type Timers = {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(h: unknown): void;
  setInterval(fn: () => void, ms: number): unknown;
  clearInterval(h: unknown): void;
};
const realTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
  setInterval: (fn, ms) => setInterval(fn, ms),
  clearInterval: (h) => clearInterval(h as NodeJS.Timeout),
};

/** The stream's clocks: heartbeat, terminal and hard-close delays on injectable timers; the read model is polled on real time. */
export const streamConfig: { heartbeatMs: number; terminalCloseMs: number; maxMs: number; pollMs: number; timers: Timers } = {
  heartbeatMs: 15_000,
  terminalCloseMs: 5_000,
  maxMs: 30 * 60_000,
  pollMs: 200,
  timers: realTimers,
};

function openStream(deps: AppDeps, t: Tenant, id: string, kind: StatusKind, lastEventId: number | null, onClose: (f: () => void) => void): PassThrough {
  const out = new PassThrough();
  const { timers } = streamConfig;
  let seen = -1;
  let closing = false;
  let latest: { tool_call_id: string; status: string } | null = null;
  let ended = false;
  const handles: { t: unknown[]; i: unknown[] } = { t: [], i: [] };
  const send = (event: string, evId: string, data: unknown) => {
    if (!ended) out.write(`event: ${event}\nid: ${evId}\ndata: ${JSON.stringify(data)}\n\n`);
  };
  const end = () => {
    if (ended) return;
    ended = true;
    for (const h of handles.t) timers.clearTimeout(h);
    for (const h of handles.i) timers.clearInterval(h);
    clearInterval(poller);
    out.end();
  };
  const statusOf = (v: ReturnType<typeof statusView>) => ('payment_status' in v ? v.payment_status : v.verification_status);
  const tick = async () => {
    const row = await readStatusRow(deps, t, id).catch(() => undefined);
    if (!row || ended) return;
    const v = statusView(kind, row);
    latest = { tool_call_id: v.tool_call_id, status: statusOf(v) };
    if (seen < 0) {
      // A Last-Event-ID past every change is no resume (another call's, or made up): a fresh open.
      if (lastEventId === null || lastEventId > v.events.length) {
        seen = v.events.length;
        send('snapshot', String(seen), v);
      } else seen = lastEventId;
    }
    while (seen < v.events.length) {
      seen++;
      send('update', String(seen), { ...v, event: v.events[seen - 1] });
    }
    if (!closing && TERMINAL[kind].has(statusOf(v))) {
      closing = true;
      handles.t.push(
        timers.setTimeout(() => {
          send('done', `${seen}.done`, latest);
          end();
        }, streamConfig.terminalCloseMs),
      );
    }
  };
  let busy = false;
  const poller = setInterval(() => {
    if (busy) return;
    busy = true;
    void tick().finally(() => (busy = false));
  }, streamConfig.pollMs);
  busy = true;
  void tick().finally(() => (busy = false));
  handles.i.push(timers.setInterval(() => !ended && out.write(': heartbeat\n\n'), streamConfig.heartbeatMs));
  handles.t.push(timers.setTimeout(end, streamConfig.maxMs));
  onClose(end);
  out.write(': open\n\n');
  return out;
}

export async function statusStreamRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  for (const kind of ['payment', 'verification'] as const) {
    defineRoute(app, deps, {
      method: 'GET',
      url: `/v1/tool-calls/:id/${kind}-status/stream`,
      operationId: kind === 'payment' ? 'streamToolCallPaymentStatus' : 'streamToolCallVerificationStatus',
      summary: `Server-sent events of the ${kind} view: snapshot, update per change, done; Last-Event-ID resumes`,
      tags: ['tool-calls'],
      auth: 'key_or_service',
      scope: 'sessions:read',
      params: z.object({ id: z.string() }), // any length: a malformed id is the bare 400 below
      responses: { 200: null },
      errors: [[400, 'invalid_tool_call_id'], [401, 'unauthorized'], [404, 'not_found']],
      async handler(ctx) {
        const id = canonicalToolCallId(ctx.params.id);
        if (!id) throw malformedId();
        const tenant = await tenantOf(ctx as never);
        if (!(await readStatusRow(ctx.deps, tenant, id))) throw notVisible();
        const h = ctx.req.headers['last-event-id'];
        const m = typeof h === 'string' ? /^(\d{1,9})/.exec(h) : null;
        const body = openStream(ctx.deps, tenant, id, kind, m ? Number(m[1]) : null, (f) => ctx.reply.raw.on('close', f));
        return { status: 200, body, headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' } };
      },
    });
  }
}
