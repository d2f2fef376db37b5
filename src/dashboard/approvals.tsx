import type { FastifyInstance, FastifyReply, FastifyRequest, preHandlerHookHandler } from 'fastify';
import { render } from 'preact-render-to-string';
import type { VNode } from 'preact';
import { Rejection } from '../eventstore/handler.ts';
import { ApprovalFeed, type ApprovalChange } from '../usecases/approval-feed.ts';
import { approvalQueue, decideApproval, deciders, findApproval } from '../usecases/approvals.ts';
import { ApprovalDetail, QueueRegion } from './approvals-view.tsx';
import { csrfOk, flash, formField, personRun, takeFlash, type DashboardDeps } from './context.ts';
import { DASHBOARD_HEADERS, Shell, sendPage } from './layout.tsx';
import { adminOf, notFoundIn } from './browse.tsx';
import { refusedPage, roleRefusedPage } from './refused.tsx';
import type { Person } from './session.ts';
import { LiveStreams } from './stream.ts';

// Approvals: the queue of calls a policy held, one approval's page, and the
// decision (the same use case, role check and one-winner rule as
// POST /v1/approvals/:id/decide; the person is the actor). Live on every
// instance: /dashboard/approvals/events streams each change of the
// organization's approvals (src/usecases/approval-feed.ts), and the page's
// regions reload on it. Reading works without JavaScript; deciding is a form
// post answered by a redirect with a notice.

const HEARTBEAT_MS = 15_000;
/** A stream lasts this long, then the browser reconnects (and the session is checked again). */
const STREAM_MAX_MS = 30 * 60_000;
const ID = /^[A-Za-z0-9_-]{1,100}$/;

type Deps = DashboardDeps;

const isFragment = (req: FastifyRequest) => (req.query as Record<string, unknown> | undefined)?.fragment !== undefined;
const sendFragment = (reply: FastifyReply, node: VNode) => reply.headers(DASHBOARD_HEADERS).type('text/html; charset=utf-8').send(render(node));
/** Deciding needs admin in the held call's project (a project override raises or narrows the organization role, except for owners), as POST /v1/approvals/:id/decide. */

export async function approvalsRoutes(app: FastifyInstance, deps: Deps, signedIn: preHandlerHookHandler): Promise<void> {
  const feed = new ApprovalFeed(deps.db, deps.readSide.progress);
  const streams = new LiveStreams(app);
  app.addHook('preClose', async () => {
    await feed.close();
  });

  app.get('/dashboard/approvals', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const query = req.query as Record<string, unknown>;
    const cursor = (name: string) => (typeof query[name] === 'string' && ID.test(query[name]) ? query[name] : undefined);
    const page = { pendingAfter: cursor('pending_after'), historyAfter: cursor('history_after') };
    const q = await approvalQueue(deps, person.orgId, person.projectId, page);
    const region = <QueueRegion {...q} page={page} now={deps.now()} />;
    if (isFragment(req)) return sendFragment(reply, region);
    return sendPage(
      reply,
      <Shell person={person} title="Approvals" active="approvals" path="/dashboard/approvals" notice={takeFlash(req, reply)} scripts={['live.js']} styles={['flows.css']}>
        <p class="lede" data-live-stream="/dashboard/approvals/events" data-live-event="approval" data-live-fires="approvals-changed" data-live="off" id="live">
          Calls your policies held until a person decides. This list updates by itself while it is open.
        </p>
        {region}
      </Shell>,
    );
  });

  app.get('/dashboard/approvals/events', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    streams.start(reply, (stream) => {
      const send = async (c: ApprovalChange) => {
        if (c.project_id !== null && c.project_id !== person.projectId) return;
        const email = c.decided_by ? (await deciders(deps, person.orgId, [c]).catch(() => new Map<string, string>())).get(c.decided_by) : undefined;
        stream.write(`event: approval\ndata: ${JSON.stringify({ id: c.id, status: c.status, decided_by_email: email ?? null })}\n\n`);
      };
      const stop = feed.subscribe(person.orgId, (c) => void send(c));
      const beat = setInterval(() => stream.write(': heartbeat\n\n'), HEARTBEAT_MS);
      const max = setTimeout(() => stream.end(), STREAM_MAX_MS);
      return () => {
        stop();
        clearInterval(beat);
        clearTimeout(max);
      };
    });
  });

  app.get('/dashboard/approvals/:id', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const id = (req.params as { id: string }).id;
    const a = ID.test(id) ? await findApproval(deps, person.orgId, id) : undefined;
    if (!a) return notFoundIn(reply, person, 'approvals', 'approval', { href: '/dashboard/approvals', label: 'the approvals' }, 'This organization');
    const detail = <ApprovalDetail a={a} people={await deciders(deps, person.orgId, [a])} now={deps.now()} csrf={person.csrfToken} mayDecide={await adminOf(deps, person, a.project_id)} />;
    if (isFragment(req)) return sendFragment(reply, detail);
    return sendPage(
      reply,
      <Shell person={person} title={`Approval ${a.id}`} active="approvals" path={`/dashboard/approvals/${a.id}`} notice={takeFlash(req, reply)} scripts={['live.js']} styles={['flows.css']}>
        <p class="lede" data-live-stream="/dashboard/approvals/events" data-live-event="approval" data-live-fires="approvals-changed" data-live="off" id="live">
          <a href="/dashboard/approvals">All approvals</a>
        </p>
        {detail}
      </Shell>,
    );
  });

  app.post('/dashboard/approvals/:id/decide', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    if (!csrfOk(req, deps.baseUrl, person)) return refusedPage(reply);
    const id = (req.params as { id: string }).id;
    const a = ID.test(id) ? await findApproval(deps, person.orgId, id) : undefined;
    if (!a) return notFoundIn(reply, person, 'approvals', 'approval', { href: '/dashboard/approvals', label: 'the approvals' }, 'This organization');
    if (!(await adminOf(deps, person, a.project_id))) return roleRefusedPage(reply, person, 'admin', 'approvals');
    const back = `/dashboard/approvals/${encodeURIComponent(a.id)}`;
    const decision = formField(req.body, 'decision');
    const reason = formField(req.body, 'reason').trim().slice(0, 1000) || null;
    if (decision !== 'approve' && decision !== 'deny') {
      flash(reply, 'Choose Approve or Deny.', 'error');
      return reply.redirect(back, 303);
    }
    try {
      const d = await decideApproval(deps, personRun(deps, req, person), { orgId: person.orgId, id: a.id, decision, reason, by: person.userId });
      const outcome = d.status === 'execution_failed' ? 'Approved, but the call failed when it ran: see its result below.' : d.status === 'approved' ? 'Approved; the held call ran.' : 'Denied; the agent is told so.';
      flash(reply, outcome, d.status === 'execution_failed' ? 'error' : 'ok');
    } catch (err) {
      if (!(err instanceof Rejection) || (err.code !== 'approval_not_pending' && err.code !== 'approval_expired')) throw err;
      flash(reply, await alreadyText(deps, person, a.id, err.code), 'error');
    }
    return reply.redirect(back, 303);
  });
}

/** Why a decision did not land: someone decided first (who, and what), or it expired. */
async function alreadyText(deps: Deps, person: Person, id: string, code: string): Promise<string> {
  const now = await findApproval(deps, person.orgId, id);
  if (code === 'approval_expired' || now?.status === 'expired') return 'It expired before it was decided; nothing ran. The agent has to ask again.';
  const by = now?.decided_by ? ((await deciders(deps, person.orgId, [now])).get(now.decided_by) ?? now.decided_by) : 'someone else';
  return `Already ${now?.status === 'denied' ? 'denied' : 'approved'} by ${by}: your decision was not recorded.`;
}
