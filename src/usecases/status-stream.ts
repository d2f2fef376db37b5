import type { Ports, Tenant } from './context.ts';
import { readStatusRow, type StatusKind, statusView } from './tool-calls.ts';

// The event streams of the payment and verification views (spec 6 Streams,
// 8 Limits): `snapshot` first, an `update` per change, `done` after a
// terminal status; a heartbeat every 15 s; the stream closes 5 s after a
// terminal status, or after 30 minutes. Each event carries an id, the number
// of status changes it reflects; a resume after the k-th gets the changes
// after it and no snapshot, so nothing is lost or repeated. The watch polls
// the read model (fed from the log), so a change written through any app
// instance on the same database reaches it. The HTTP route frames what it
// emits as server-sent events.
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

/** Where a watch writes: named events with their ids, comments (open, heartbeat), and its end. */
export type StatusSink = { event(name: string, id: string, data: unknown): void; comment(text: string): void; end(): void };

/** Watches one call's view until a terminal status (or the hard close); answers the function that stops it (the client left). */
export function watchStatus(ports: Pick<Ports, 'db'>, t: Tenant, id: string, kind: StatusKind, lastEventId: number | null, sink: StatusSink): () => void {
  const { timers } = streamConfig;
  let seen = -1;
  let closing = false;
  let latest: { tool_call_id: string; status: string } | null = null;
  let ended = false;
  const handles: { t: unknown[]; i: unknown[] } = { t: [], i: [] };
  const send = (event: string, evId: string, data: unknown) => {
    if (!ended) sink.event(event, evId, data);
  };
  const end = () => {
    if (ended) return;
    ended = true;
    for (const h of handles.t) timers.clearTimeout(h);
    for (const h of handles.i) timers.clearInterval(h);
    clearInterval(poller);
    sink.end();
  };
  const statusOf = (v: ReturnType<typeof statusView>) => ('payment_status' in v ? v.payment_status : v.verification_status);
  const tick = async () => {
    const row = await readStatusRow(ports, t, id).catch(() => undefined);
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
  handles.i.push(timers.setInterval(() => !ended && sink.comment('heartbeat'), streamConfig.heartbeatMs));
  handles.t.push(timers.setTimeout(end, streamConfig.maxMs));
  sink.comment('open');
  return end;
}
