import type { FastifyInstance, FastifyRequest, preHandlerHookHandler } from 'fastify';
import { render } from 'preact-render-to-string';
import { watchLogs } from '../usecases/log-stream.ts';
import { listSessions } from '../usecases/session-history.ts';
import { type CallRow, toolCallPage } from '../usecases/session-activity.ts';
import { readSession, type SessionRecord } from '../usecases/sessions.ts';
import { canonicalToolCallId, readStatusRow, readToolCall, statusView, type PaymentStatusView, type VerificationStatusView } from '../usecases/tool-calls.ts';
import { BrowseList, notFoundIn } from './browse.tsx';
import { Badge, type Column, Table, Time } from './components.tsx';
import { type DashboardDeps, takeFlash } from './context.ts';
import { DASHBOARD_HEADERS, Shell, sendPage } from './layout.tsx';
import type { Person } from './session.ts';
import { LiveStreams } from './stream.ts';

// Sessions and their tool calls: the project's sessions (cursor-paged), one
// session with its calls live (/dashboard/sessions/<id>/events streams each
// call recorded or changed, through the log stream's watch over the tool-call
// read model, so a call made on any instance shows on every one), the
// project's calls, and one call with its payment and verification views. Read
// only, as GET /v1/sessions, /v1/tool-calls and their status views.

const PAGE = 50;
const SESSIONS = { href: '/dashboard/sessions', label: 'the sessions' };
const ID = /^[A-Za-z0-9_-]{1,100}$/;
type Deps = DashboardDeps;
const tenantOf = (p: Person) => ({ orgId: p.orgId, projectId: p.projectId });
const query = (req: FastifyRequest, name: string) => {
  const v = (req.query as Record<string, unknown> | undefined)?.[name];
  return typeof v === 'string' && v.length <= 400 ? v : undefined;
};
const CALL_TONE = { success: 'ok', error: 'danger', running: 'warn' } as const;
const CallStatus = ({ status }: { status: CallRow['status'] }) => <Badge tone={CALL_TONE[status]}>{status}</Badge>;

function callColumns(now: Date, withSession: boolean): Column<CallRow>[] {
  return [
    { label: 'Call', cell: (c) => <a href={`/dashboard/tool-calls/${encodeURIComponent(c.id)}`} data-call={c.id}>{c.id}</a> },
    ...(withSession ? [{ label: 'Session', cell: (c: CallRow) => <a href={`/dashboard/sessions/${encodeURIComponent(c.session_id)}`}>{c.session_id}</a> }] : []),
    { label: 'Tool', cell: (c) => <code>{`${c.server_id}/${c.tool_name}`}</code> },
    { label: 'Status', cell: (c) => <CallStatus status={c.status} /> },
    { label: 'Payment or verification', cell: (c) => (c.view ? `${c.view}: ${c.view_status ?? 'pending'}` : '—') },
    { label: 'Took', cell: (c) => (c.duration_ms === null ? '—' : `${c.duration_ms} ms`), numeric: true },
    { label: 'Called', cell: (c) => <Time iso={c.called_at} now={now} /> },
  ];
}

/** A session's calls, newest first: the region the live stream reloads (also served alone with ?fragment=1). */
function CallsRegion({ req, s, rows, next, now }: { req: FastifyRequest; s: SessionRecord; rows: CallRow[]; next: string | null; now: Date }) {
  const base = `/dashboard/sessions/${encodeURIComponent(s.id)}`;
  return (
    <div id="calls-live" hx-get={`${base}?fragment=1`} hx-trigger="calls-changed from:body" hx-swap="outerHTML">
      <BrowseList req={req} caption={`Tool calls of this session, newest first (${s.tool_call_count} in all)`} columns={callColumns(now, false)} rows={rows} id="calls" empty="No tool calls yet." cursor="before" next={next} label="tool calls">
        <p>Each call the agent makes in this session appears here as it runs.</p>
      </BrowseList>
    </div>
  );
}

export async function sessionRoutes(app: FastifyInstance, deps: Deps, signedIn: preHandlerHookHandler): Promise<void> {
  const streams = new LiveStreams(app);

  app.get('/dashboard/sessions', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const cursor = query(req, 'cursor');
    let page: Awaited<ReturnType<typeof listSessions>>;
    try {
      page = await listSessions(deps, tenantOf(person), { cursor, limit: PAGE });
    } catch {
      page = { sessions: [], next_cursor: null }; // a cursor this service did not give: an empty page with the way back
    }
    const now = deps.now();
    const columns: Column<SessionRecord>[] = [
      { label: 'Session', cell: (s) => <a href={`/dashboard/sessions/${encodeURIComponent(s.id)}`} data-session={s.id}>{s.id}</a> },
      { label: 'End user', cell: (s) => s.user_id },
      { label: 'Servers', cell: (s) => s.servers.join(', ') },
      { label: 'Status', cell: (s) => <Badge tone={s.status === 'active' ? 'ok' : 'neutral'}>{s.status}</Badge> },
      { label: 'Calls', cell: (s) => s.tool_call_count, numeric: true },
      { label: 'Created', cell: (s) => <Time iso={s.created_at} now={now} /> },
    ];
    return sendPage(
      reply,
      <Shell person={person} title="Sessions" active="sessions" path="/dashboard/sessions" notice={takeFlash(req, reply)}>
        <p class="lede">
          Agents' sessions in this project, each with the tool calls it made. All calls, newest first: <a href="/dashboard/tool-calls">tool calls</a>.
        </p>
        <BrowseList req={req} caption="Sessions, newest first" columns={columns} rows={page.sessions} id="sessions" empty="No sessions yet." cursor="cursor" next={page.next_cursor} label="sessions" />
      </Shell>,
    );
  });

  app.get('/dashboard/sessions/:id', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const id = (req.params as { id: string }).id;
    const s = ID.test(id) ? await readSession(deps, tenantOf(person), id) : undefined;
    if (!s) return notFoundIn(reply, person, 'sessions', 'session', SESSIONS);
    const page = await toolCallPage(deps, tenantOf(person), { sessionId: s.id, before: query(req, 'before'), limit: PAGE });
    const now = deps.now();
    const region = <CallsRegion req={req} s={s} rows={page.rows} next={page.next} now={now} />;
    if (query(req, 'fragment') !== undefined) return reply.headers(DASHBOARD_HEADERS).type('text/html; charset=utf-8').send(render(region));
    return sendPage(
      reply,
      <Shell person={person} title={`Session ${s.id}`} active="sessions" path={`/dashboard/sessions/${s.id}`} notice={takeFlash(req, reply)} scripts={['live.js']} styles={['flows.css']}>
        <p class="lede" id="live" data-live-event="call" data-live-fires="calls-changed" data-live-stream={`/dashboard/sessions/${encodeURIComponent(s.id)}/events`} data-live="off">
          <a href="/dashboard/sessions">All sessions</a>. The calls below update by themselves while this page is open.
        </p>
        <dl class="facts">
          <dt>Status</dt>
          <dd id="session-status">{s.status}</dd>
          <dt>End user</dt>
          <dd>{s.user_id}</dd>
          <dt>Servers</dt>
          <dd>{s.servers.join(', ')}</dd>
          <dt>Environment</dt>
          <dd>{s.environment}</dd>
          <dt>Created</dt>
          <dd>
            <Time iso={s.created_at} now={now} />
          </dd>
          {s.closed_at ? (
            <>
              <dt>Closed</dt>
              <dd>
                <Time iso={s.closed_at} now={now} />
              </dd>
            </>
          ) : null}
        </dl>
        <h2>Tool calls</h2>
        {region}
      </Shell>,
    );
  });

  app.get('/dashboard/sessions/:id/events', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const id = (req.params as { id: string }).id;
    const s = ID.test(id) ? await readSession(deps, tenantOf(person), id) : undefined;
    if (!s) return reply.code(404).headers(DASHBOARD_HEADERS).type('text/plain; charset=utf-8').send('no such session');
    streams.start(reply, (stream) =>
      watchLogs(deps, tenantOf(person), {}, { lastEventId: null, limit: 0 }, {
        event: (_name, eventId, data) => {
          const c = data as { id: string; session_id: string; tool: string; server: string; status: string };
          if (c.session_id === s.id) stream.write(`event: call\nid: ${eventId}\ndata: ${JSON.stringify({ id: c.id, tool: `${c.server}/${c.tool}`, status: c.status })}\n\n`);
        },
        comment: (text) => stream.write(`: ${text}\n\n`),
        end: () => stream.end(),
      }),
    );
  });

  app.get('/dashboard/tool-calls', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const before = query(req, 'before');
    const page = await toolCallPage(deps, tenantOf(person), { before, limit: PAGE });
    return sendPage(
      reply,
      <Shell person={person} title="Tool calls" active="sessions" path="/dashboard/tool-calls" notice={takeFlash(req, reply)}>
        <p class="lede">
          Every tool call of this project, newest first. By session: <a href="/dashboard/sessions">sessions</a>.
        </p>
        <BrowseList req={req} caption="Tool calls, newest first" columns={callColumns(deps.now(), true)} rows={page.rows} id="calls" empty="No tool calls yet." cursor="before" next={page.next} label="tool calls" />
      </Shell>,
    );
  });

  app.get('/dashboard/tool-calls/:id', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const id = canonicalToolCallId((req.params as { id: string }).id);
    const call = id ? await readToolCall(deps, tenantOf(person), id) : undefined;
    const row = id && call ? await readStatusRow(deps, tenantOf(person), id) : undefined;
    if (!call || !row) return notFoundIn(reply, person, 'sessions', 'tool call', SESSIONS);
    const now = deps.now();
    return sendPage(
      reply,
      <Shell person={person} title={`Tool call ${call.id}`} active="sessions" path={`/dashboard/tool-calls/${call.id}`} notice={takeFlash(req, reply)} styles={['flows.css']}>
        <p class="lede">
          <a href={`/dashboard/sessions/${encodeURIComponent(call.session_id)}`}>Session {call.session_id}</a>
        </p>
        <dl class="facts">
          <dt>Tool</dt>
          <dd>
            <code id="call-tool">{`${call.server_id}/${call.tool_name}`}</code>
          </dd>
          <dt>Status</dt>
          <dd id="call-status">
            <CallStatus status={call.status} />
          </dd>
          {call.error_code ? (
            <>
              <dt>Error</dt>
              <dd>
                <code>{call.error_code}</code>
              </dd>
            </>
          ) : null}
          <dt>Called</dt>
          <dd>
            <Time iso={call.called_at} now={now} />
          </dd>
          <dt>Took</dt>
          <dd>{call.duration_ms === null ? 'still running' : `${call.duration_ms} ms`}</dd>
        </dl>
        <PaymentView v={statusView('payment', row) as PaymentStatusView} now={now} />
        <VerificationView v={statusView('verification', row) as VerificationStatusView} now={now} />
        <h2>Input (the payload the agent sent)</h2>
        <pre id="call-input" tabIndex={0} aria-label="Input">{JSON.stringify(call.input ?? null, null, 2)}</pre>
        <h2>Output (the payload the provider answered)</h2>
        <pre id="call-output" tabIndex={0} aria-label="Output">{JSON.stringify(call.output ?? null, null, 2)}</pre>
      </Shell>,
    );
  });
}

type ViewEvents = { events: { event_type: string; received_at: string }[] };
function ViewEventsTable({ v, id, now }: { v: ViewEvents; id: string; now: Date }) {
  if (v.events.length === 0) return <p>No provider event about it yet.</p>;
  return <Table caption="What the provider told us, oldest first" id={id} rows={v.events} columns={[{ label: 'Event', cell: (e) => <code>{e.event_type}</code> }, { label: 'Received', cell: (e) => <Time iso={e.received_at} now={now} /> }]} />;
}

function PaymentView({ v, now }: { v: PaymentStatusView; now: Date }) {
  return (
    <section class="panel" aria-labelledby="payment-title" id="payment-view">
      <h2 id="payment-title">Payment</h2>
      {v.payment_status === 'unknown' ? (
        <p id="payment-status">This call started no payment.</p>
      ) : (
        <>
          <p>
            Status <strong id="payment-status">{v.payment_status}</strong>
            {v.idempotency_key ? (
              <>
                {' '}
                (provider key <code>{v.idempotency_key}</code>)
              </>
            ) : null}
          </p>
          <ViewEventsTable v={v} id="payment-events" now={now} />
        </>
      )}
    </section>
  );
}

function VerificationView({ v, now }: { v: VerificationStatusView; now: Date }) {
  return (
    <section class="panel" aria-labelledby="verification-title" id="verification-view">
      <h2 id="verification-title">Verification</h2>
      {v.verification_status === 'unknown' ? (
        <p id="verification-status">This call started no verification.</p>
      ) : (
        <>
          <p>
            Status <strong id="verification-status">{v.verification_status}</strong>
            {v.hosted_url && /^https?:\/\//i.test(v.hosted_url) ? (
              <>
                {' '}
                (<a href={v.hosted_url} rel="noopener noreferrer">the provider's verification page</a>)
              </>
            ) : null}
          </p>
          <ViewEventsTable v={v} id="verification-events" now={now} />
        </>
      )}
    </section>
  );
}
