import type { FastifyInstance, FastifyReply, FastifyRequest, preHandlerHookHandler } from 'fastify';
import { businessEventTypes } from '../../events/index.ts';
import { Rejection } from '../eventstore/handler.ts';
import { attemptsPerHour, autoPauseCause, deliveryPage } from '../usecases/webhook-activity.ts';
import { getDelivery, redeliver, replayEvent } from '../usecases/webhook-deliveries.ts';
import { createEndpoint, type EndpointRow, findEndpoint, listEndpoints, rotateEndpointSecret, updateEndpoint } from '../usecases/webhook-endpoints.ts';
import { Button, type Column, ErrorSummary, Field, type FieldError, PostForm, Select, Time } from './components.tsx';
import { type DashboardDeps, formField, rejectionText, takeFlash } from './context.ts';
import { Shell, sendPage } from './layout.tsx';
import { action, adminHere, BrowseList, notFoundIn, SENT, writeRefused } from './browse.tsx';
import { projectRun } from './project-run.ts';
import type { Person } from './session.ts';
import { AutoPaused, DeliveryStatus, DeliveryTable, EndpointStatus, HourChart, NewSecret } from './webhooks-view.tsx';

// Webhooks: the project's endpoints (create: the signing secret shown once;
// pause, resume, rotate the secret: the new one shown once), each endpoint's
// deliveries and dead letters (cursor-paged), one delivery's request and
// response, redelivery of a dead letter, replay of a stored event, why an
// endpoint paused itself, and attempts per hour as a chart. The use cases of
// /v1/webhook-endpoints; writing needs admin in the project (an API key with
// webhooks:write is an admin's to make), reading any member.

const PAGE = 50;
const HOURS = 24;
const ID = /^[A-Za-z0-9_-]{1,100}$/;
const DIGITS = /^\d{1,19}$/;
const ASSETS = { scripts: ['locale-guard.js', 'uplot.js', 'webhooks-chart.js'], styles: ['uplot.css', 'flows.css'] } as const;

type Deps = DashboardDeps;
type Form = { name?: string; event?: string; url?: string };

const tenantOf = (p: Person) => ({ orgId: p.orgId, projectId: p.projectId });
const q = (req: FastifyRequest, name: string) => {
  const v = (req.query as Record<string, unknown> | undefined)?.[name];
  return typeof v === 'string' && v.length <= 100 ? v : undefined;
};
const ucCtx = (deps: Deps, req: FastifyRequest, p: Person) => ({ ports: deps, tenant: tenantOf(p), run: projectRun(deps, req, p) });

export async function webhookRoutes(app: FastifyInstance, deps: Deps, signedIn: preHandlerHookHandler): Promise<void> {
  const listPage = async (req: FastifyRequest, reply: FastifyReply, opts: { status?: number; errors?: FieldError[]; form?: Form; created?: EndpointRow & { secret: string } } = {}) => {
    const person = req.person!;
    const before = q(req, 'before');
    const list = await listEndpoints(deps, tenantOf(person), { before, limit: PAGE });
    const hours = await attemptsPerHour(deps, tenantOf(person), { hours: HOURS, now: deps.now() });
    const writer = await adminHere(deps, person);
    const now = deps.now();
    const columns: Column<EndpointRow>[] = [
      { label: 'Name', cell: (e) => <a href={`/dashboard/webhooks/${encodeURIComponent(e.id)}`} data-endpoint={e.id}>{e.name}</a> },
      { label: 'Event', cell: (e) => <code>{e.event}</code> },
      { label: 'URL', cell: (e) => <code class="hash">{e.webhook_url}</code> },
      { label: 'Status', cell: (e) => <EndpointStatus status={e.status} /> },
      { label: 'Delivered', cell: (e) => e.total_runs, numeric: true },
      { label: 'Last delivered', cell: (e) => <Time iso={e.last_run_at} now={now} /> },
    ];
    const form = opts.form ?? {};
    const err = (f: string) => opts.errors?.find((e) => e.field === f)?.message;
    return sendPage(
      reply,
      <Shell person={person} title="Webhooks" active="webhooks" path="/dashboard/webhooks" notice={opts.created ? { text: 'The endpoint is created.', tone: 'ok' } : takeFlash(req, reply)} {...ASSETS}>
        {opts.created ? <NewSecret secret={opts.created.secret} what={`The endpoint ${opts.created.name} signs every delivery with it.`} /> : null}
        <ErrorSummary errors={opts.errors ?? []} />
        <p class="lede">Endpoints of this project: each receives one event type, signed, retried on failure, dead-lettered after the last attempt.</p>
        <BrowseList req={req} caption="Endpoints, newest first" columns={columns} rows={list.triggers} id="endpoints" empty="No endpoints yet." cursor="before" next={list.next_before} label="endpoints" path="/dashboard/webhooks">
          {writer ? <p>Create one below.</p> : null}
        </BrowseList>
        <HourChart hours={hours} what="in this project" />
        {writer ? (
          <div class="panel">
            <h2>Create an endpoint</h2>
            <PostForm action="/dashboard/webhooks" csrf={person.csrfToken} id="create-endpoint">
              <Field id="endpoint-name" name="name" label="Name" hint="What receives it, e.g. “order service”." value={form.name} error={err('endpoint-name')} maxLength={200} />
              <Select id="endpoint-event" name="event" label="Event" hint="The one event type this endpoint receives." options={businessEventTypes.map((e) => ({ value: e, label: e }))} value={form.event ?? 'mandate.created'} error={err('endpoint-event')} />
              <Field id="endpoint-url" name="url" label="URL" hint="Where we POST each event: https://…" value={form.url} error={err('endpoint-url')} maxLength={2048} />
              <Button id="create-endpoint-submit">Create endpoint</Button>
            </PostForm>
          </div>
        ) : (
          <p id="cannot-write">Creating and changing endpoints needs the admin role in this project.</p>
        )}
      </Shell>,
      opts.status ?? 200,
    );
  };

  const endpointPage = async (req: FastifyRequest, reply: FastifyReply, e: EndpointRow, opts: { secret?: string } = {}) => {
    const person = req.person!;
    const tenant = tenantOf(person);
    const now = deps.now();
    const writer = await adminHere(deps, person);
    const before = q(req, 'before');
    const deadBefore = q(req, 'dead_before');
    const base = `/dashboard/webhooks/${encodeURIComponent(e.id)}`;
    const [deliveries, dead, hours, cause] = await Promise.all([
      deliveryPage(deps, tenant, e.id, { before, limit: PAGE }),
      deliveryPage(deps, tenant, e.id, { before: deadBefore, dead: true, limit: PAGE }),
      attemptsPerHour(deps, tenant, { triggerId: e.id, hours: HOURS, now }),
      e.status === 'error' ? autoPauseCause(deps, e.id) : Promise.resolve(null),
    ]);
    const csrf = person.csrfToken;
    return sendPage(
      reply,
      <Shell person={person} title={`Endpoint ${e.name}`} active="webhooks" path={base} notice={opts.secret ? { text: 'The signing secret is rotated.', tone: 'ok' } : takeFlash(req, reply)} {...ASSETS}>
        <p class="lede">
          <a href="/dashboard/webhooks">All endpoints</a>
        </p>
        {opts.secret ? <NewSecret secret={opts.secret} what="The previous secret keeps signing beside it for 24 hours, so your receiver can switch." /> : null}
        {cause ? <AutoPaused cause={cause} now={now} /> : null}
        <dl class="facts">
          <dt>Status</dt>
          <dd id="endpoint-status">
            <EndpointStatus status={e.status} />
          </dd>
          <dt>Event</dt>
          <dd>
            <code id="endpoint-event">{e.event}</code>
          </dd>
          <dt>URL</dt>
          <dd>
            <code class="hash">{e.webhook_url}</code>
          </dd>
          <dt>Id</dt>
          <dd>
            <code id="endpoint-id">{e.id}</code>
          </dd>
          <dt>Signing</dt>
          <dd>Every delivery is signed (Standard Webhooks: <code>webhook-signature</code>). The secret is shown only when made.</dd>
          <dt>Created</dt>
          <dd>
            <Time iso={e.created_at} now={now} />
          </dd>
        </dl>
        {writer ? (
          <div class="actions panel">
            <PostForm action={`${base}/status`} csrf={csrf} inline>
              {e.status === 'active' ? (
                <Button kind="secondary" id="pause" name="status" value="paused">
                  Pause
                </Button>
              ) : (
                <Button id="resume" name="status" value="active">
                  Resume
                </Button>
              )}
            </PostForm>
            <PostForm action={`${base}/rotate`} csrf={csrf} inline>
              <Button kind="secondary" id="rotate">
                Rotate the signing secret
              </Button>
            </PostForm>
          </div>
        ) : (
          <p id="cannot-write">Changing this endpoint needs the admin role in this project.</p>
        )}
        <HourChart hours={hours} what="to this endpoint" />
        <h2>Dead letters</h2>
        <DeliveryTable endpointId={e.id} page={dead} now={now} csrf={csrf} mayWrite={writer} dead req={req} />
        <h2>Deliveries</h2>
        <DeliveryTable endpointId={e.id} page={deliveries} now={now} csrf={csrf} mayWrite={writer} req={req} />
        {writer ? (
          <div class="panel">
            <h2>Replay an event</h2>
            <PostForm action={`${base}/replay`} csrf={csrf} id="replay">
              <Field id="replay-event" name="event_id" label="Event id" hint={`The id of a stored ${e.event} event (a delivery's event id); it is sent to this endpoint again, no new event is made.`} maxLength={100} />
              <Button kind="secondary" id="replay-submit">
                Replay to this endpoint
              </Button>
            </PostForm>
          </div>
        ) : null}
      </Shell>,
    );
  };

  /** The person's endpoint by the path's id, or the not-found page (another project's is absent). */
  const endpointOf = async (req: FastifyRequest, reply: FastifyReply): Promise<EndpointRow | null> => {
    const id = (req.params as { id: string }).id;
    const e = ID.test(id) ? await findEndpoint(deps, tenantOf(req.person!), id) : undefined;
    if (e) return e;
    notFoundIn(reply, req.person!, 'webhooks', 'webhook endpoint', WEBHOOKS);
    return null;
  };
  const gate = (req: FastifyRequest, reply: FastifyReply) => writeRefused(deps, req, reply, 'webhooks');
  const back = (req: FastifyRequest) => `/dashboard/webhooks/${encodeURIComponent((req.params as { id: string }).id)}`;

  app.get('/dashboard/webhooks', { preHandler: signedIn }, (req, reply) => listPage(req, reply));

  app.post('/dashboard/webhooks', { preHandler: signedIn }, async (req, reply) => {
    if (await gate(req, reply)) return reply;
    const form: Form = { name: formField(req.body, 'name').trim(), event: formField(req.body, 'event'), url: formField(req.body, 'url').trim() };
    const errors: FieldError[] = [];
    if (!form.name || form.name.length > 200) errors.push({ field: 'endpoint-name', message: 'Enter a name of 1 to 200 characters' });
    if (!(businessEventTypes as string[]).includes(form.event ?? '')) errors.push({ field: 'endpoint-event', message: 'Choose an event type from the list' });
    if (!form.url || form.url.length > 2048) errors.push({ field: 'endpoint-url', message: 'Enter the URL we should POST to, like https://example.com/hooks' });
    if (errors.length > 0) return listPage(req, reply, { status: 400, errors, form });
    try {
      const created = await createEndpoint(ucCtx(deps, req, req.person!), { name: form.name!, event: form.event!, webhook_url: form.url! });
      return listPage(req, reply, { created });
    } catch (err) {
      if (!(err instanceof Rejection)) throw err;
      return listPage(req, reply, { status: 400, errors: [{ field: 'endpoint-url', message: rejectionText(err) }], form });
    }
  });

  app.get('/dashboard/webhooks/:id', { preHandler: signedIn }, async (req, reply) => {
    const e = await endpointOf(req, reply);
    return e ? endpointPage(req, reply, e) : reply;
  });

  action(app, deps, signedIn, '/dashboard/webhooks/:id/status', {
    active: 'webhooks',
    back,
    refusal: (r) => (r.code === 'choose_status' ? 'Choose Pause or Resume.' : undefined),
    act: async (req, person, reply) => {
      const e = await endpointOf(req, reply);
      if (!e) return SENT;
      const status = formField(req.body, 'status');
      if (status !== 'active' && status !== 'paused') throw new Rejection('choose_status', 'choose Pause or Resume');
      await updateEndpoint(ucCtx(deps, req, person), e.id, { status });
      return status === 'paused' ? 'Paused: events queue for it until you resume it.' : 'Resumed: what queued meanwhile is being sent.';
    },
  });

  app.post('/dashboard/webhooks/:id/rotate', { preHandler: signedIn }, async (req, reply) => {
    if (await gate(req, reply)) return reply;
    const e = await endpointOf(req, reply);
    if (!e) return reply;
    const r = await rotateEndpointSecret(ucCtx(deps, req, req.person!), e.id);
    // The new secret is on this answer only (stored nowhere we could show again), as a new key's is.
    return endpointPage(req, reply, e, { secret: r.secret });
  });

  app.get('/dashboard/webhooks/:id/deliveries/:did', { preHandler: signedIn }, async (req, reply) => {
    const e = await endpointOf(req, reply);
    if (!e) return reply;
    const did = (req.params as { did: string }).did;
    const person = req.person!;
    let d: Awaited<ReturnType<typeof getDelivery>>;
    try {
      d = await getDelivery(deps, tenantOf(person), e.id, DIGITS.test(did) ? did : '0');
    } catch (err) {
      if (!(err instanceof Rejection)) throw err;
      return notFoundIn(reply, person, 'webhooks', 'delivery', WEBHOOKS, 'This endpoint');
    }
    return sendPage(reply, <DeliveryPageView person={person} e={e} d={d} now={deps.now()} notice={takeFlash(req, reply)} writer={await adminHere(deps, person)} />);
  });

  action(app, deps, signedIn, '/dashboard/webhooks/:id/deliveries/:did/redeliver', {
    active: 'webhooks',
    back,
    act: async (req, person, reply) => {
      const e = await endpointOf(req, reply);
      if (!e) return SENT;
      const did = (req.params as { did: string }).did;
      const r = await redeliver(deps, tenantOf(person), DIGITS.test(did) ? did : '0');
      return r.trigger_status === 'active' ? `Queued again as delivery #${r.redelivery_id}: it is being sent now.` : `Queued again as delivery #${r.redelivery_id}; it is sent when you resume the endpoint.`;
    },
  });

  action(app, deps, signedIn, '/dashboard/webhooks/:id/replay', {
    active: 'webhooks',
    back,
    refusal: (r) => REPLAY_REFUSALS[r.code],
    act: async (req, person, reply) => {
      const e = await endpointOf(req, reply);
      if (!e) return SENT;
      const r = await replayEvent(deps, tenantOf(person), formField(req.body, 'event_id').trim().toLowerCase(), e.id);
      return `Event ${r.event_id} replayed: ${r.dispatched} delivery queued.`;
    },
  });
}

const WEBHOOKS = { href: '/dashboard/webhooks', label: 'the webhooks' };

const REPLAY_REFUSALS: Record<string, string> = {
  not_found: 'No stored event of this project has that id: copy it from a delivery of this endpoint. Nothing was queued.',
  trigger_event_mismatch: 'That event is of another type (or another provider) than this endpoint receives. Nothing was queued.',
  trigger_not_active: 'The endpoint is paused: resume it first, then replay. Nothing was queued.',
};

type DeliveryDetail = Awaited<ReturnType<typeof getDelivery>>;

/** One delivery: its status, the request we sent (headers, body) and what the receiver answered. */
function DeliveryPageView({ person, e, d, now, notice, writer }: { person: Person; e: EndpointRow; d: DeliveryDetail; now: Date; notice: ReturnType<typeof takeFlash>; writer: boolean }) {
  const base = `/dashboard/webhooks/${encodeURIComponent(e.id)}`;
  const headerText = (h: Record<string, string> | null | undefined) => (h ? Object.entries(h).map(([k, v]) => `${k}: ${v}`).join('\n') : '');
  const res = d.response as { status: number | null; headers: Record<string, string> | null; body: string | null; truncated: boolean; error: string | null } | null;
  return (
    <Shell person={person} title={`Delivery #${d.delivery.id}`} active="webhooks" path={`${base}/deliveries/${d.delivery.id}`} notice={notice} styles={['flows.css']}>
      <p class="lede">
        <a href={base}>Endpoint {e.name}</a>
      </p>
      <dl class="facts">
        <dt>Status</dt>
        <dd id="delivery-status">
          <DeliveryStatus status={d.delivery.status} />
        </dd>
        <dt>Attempts</dt>
        <dd>{d.delivery.attempt}</dd>
        <dt>Event id</dt>
        <dd>
          <code id="delivery-event">{d.delivery.event_id}</code>
        </dd>
        <dt>Created</dt>
        <dd>
          <Time iso={d.delivery.created_at} now={now} />
        </dd>
        {d.delivery.next_attempt_at ? (
          <>
            <dt>Next attempt</dt>
            <dd>
              <Time iso={d.delivery.next_attempt_at} now={now} />
            </dd>
          </>
        ) : null}
      </dl>
      {writer && d.delivery.status === 'dead' ? (
        <PostForm action={`${base}/deliveries/${d.delivery.id}/redeliver`} csrf={person.csrfToken}>
          <Button id="redeliver">Redeliver</Button>
        </PostForm>
      ) : null}
      {d.request ? (
        <>
          <h2>Request we sent (last attempt)</h2>
          <h3>Headers</h3>
          <pre id="request-headers" tabIndex={0} aria-label="Request headers">{headerText(d.request.headers)}</pre>
          <h3>Body (the payload, as sent)</h3>
          <pre id="request-body" tabIndex={0} aria-label="Request body">{d.request.body}</pre>
          <h2>What the receiver answered</h2>
          {res?.error ? <p id="response-error">No answer: {res.error}</p> : null}
          {res?.status !== null && res?.status !== undefined ? (
            <>
              <p>
                Status <strong id="response-status">{res.status}</strong>
                {res.truncated ? ' (body cut at 16 KiB)' : ''}
              </p>
              <h3>Headers</h3>
              <pre id="response-headers" tabIndex={0} aria-label="Response headers">{headerText(res.headers)}</pre>
              <h3>Body (as received)</h3>
              <pre id="response-body" tabIndex={0} aria-label="Response body">{res.body ?? ''}</pre>
            </>
          ) : null}
        </>
      ) : (
        <p id="not-sent">Not sent yet{e.status !== 'active' ? ': the endpoint is paused' : ''}.</p>
      )}
    </Shell>
  );
}
