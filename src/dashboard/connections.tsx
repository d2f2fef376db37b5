import type { FastifyInstance, FastifyReply, FastifyRequest, preHandlerHookHandler } from 'fastify';
import { HOSTED_MERCHANTS, type HostedMerchant } from '../../events/hosted-connect.ts';
import { Rejection } from '../eventstore/handler.ts';
import { OwnedElsewhere } from '../usecases/browser-owners.ts';
import { type ConnectionRow, readConnection, revokeConnection } from '../usecases/connections.ts';
import { finishHostedConnect, type HostedStart, startHostedConnect } from '../usecases/hosted-connect.ts';
import { providerOf, searchCatalog, verifyConnection } from '../usecases/providers.ts';
import { connectionPage } from '../usecases/session-activity.ts';
import { workerOf } from '../usecases/signup-runner.ts';
import { action, adminHere, BrowseList, notFoundIn, queryOf, SENT, writeRefused } from './browse.tsx';
import { Badge, Button, type Column, PostForm, Table, Time } from './components.tsx';
import { type DashboardDeps, flash, rejectionText, takeFlash } from './context.ts';
import { Shell, sendPage } from './layout.tsx';
import { projectRun } from './project-run.ts';
import type { Person } from './session.ts';

// Connections: the providers of the catalog and the project's connections to
// them (verify: the provider is asked with the stored credential; revoke: the
// credential is purged, the row kept), and hosted connect started from the
// page: a browser on our server opens the shop's login page, the person logs
// in through its live view, then finishes here and the login is stored as a
// connection. The use cases of /v1/connections, /v1/providers/:slug/verify-connection
// and /v1/cart/:merchant/connect; changing needs admin in the project.

const PAGE = 50;
const ID = /^[A-Za-z0-9_-]{1,100}$/;
const SESSION = /^hcs_[A-Za-z0-9]{1,64}$/;
const MERCHANT_LABEL: Record<HostedMerchant, string> = { 'merchant-a': 'Merchant A', 'merchant-b': 'Merchant B' };

type Deps = DashboardDeps;
const tenantOf = (p: Person) => ({ orgId: p.orgId, projectId: p.projectId });
const STATUS_TONE = { connected: 'ok', pending: 'warn', revoked: 'danger', expired: 'neutral' } as const;
const ConnectionStatus = ({ status }: { status: ConnectionRow['status'] }) => <Badge tone={STATUS_TONE[status]}>{status}</Badge>;

export async function connectionRoutes(app: FastifyInstance, deps: Deps, signedIn: preHandlerHookHandler): Promise<void> {
  // The app's browser worker (the same one /v1/cart/:merchant/connect uses: hosted browsers are kept per app).
  const worker = workerOf(deps.appPorts, (hook) => app.addHook('onClose', hook));
  const hostedCtx = (req: FastifyRequest, p: Person) => ({ ports: deps.appPorts, tenant: tenantOf(p), run: projectRun(deps, req, p) });

  const listPage = async (req: FastifyRequest, reply: FastifyReply, started?: Started, refusal?: string) => {
    const person = req.person!;
    const page = await connectionPage(deps, tenantOf(person), { after: queryOf(req, 'after'), limit: PAGE });
    const writer = await adminHere(deps, person);
    const now = deps.now();
    const catalog = searchCatalog(deps, {}).servers;
    const connected = new Set(page.rows.filter((c) => c.status === 'connected').map((c) => c.server_id));
    const columns: Column<ConnectionRow>[] = [
      { label: 'Provider', cell: (c) => <a href={`/dashboard/connections/${encodeURIComponent(c.id)}`} data-connection={c.id}>{c.display_name ?? c.server_id}</a> },
      { label: 'Server', cell: (c) => <code>{c.server_id}</code> },
      { label: 'End user', cell: (c) => c.user_id ?? 'the project' },
      { label: 'Kind', cell: (c) => c.auth_type },
      { label: 'Status', cell: (c) => <ConnectionStatus status={c.status} /> },
      { label: 'Created', cell: (c) => <Time iso={c.created_at} now={now} /> },
    ];
    return sendPage(
      reply,
      <Shell person={person} title="Connections" active="connections" path="/dashboard/connections" notice={refusal ? { text: refusal, tone: 'error' } : started ? { text: 'A browser is open on the shop’s login page.', tone: 'ok' } : takeFlash(req, reply)} styles={['flows.css']}>
        {started ? <HostedStarted started={started} csrf={person.csrfToken} /> : null}
        <p class="lede">The credentials this project's agents call providers with. We keep them encrypted and never show them.</p>
        <h2>Connections</h2>
        <BrowseList req={req} caption="Connections, newest first" columns={columns} rows={page.rows} id="connections" empty="No connections yet." cursor="after" next={page.next} label="connections" path="/dashboard/connections" />
        {writer ? (
          <div class="panel" id="hosted">
            <h2>Connect a shop account</h2>
            <p>A browser on our server opens the shop's login page; you log in through its live view (we never see what you type), then finish here. The login is stored as a connection the agents can shop with.</p>
            <div class="actions">
              {HOSTED_MERCHANTS.map((m) => (
                <PostForm action={`/dashboard/connections/hosted/${m}`} csrf={person.csrfToken} inline>
                  <Button kind="secondary" id={`start-${m}`}>
                    Connect {MERCHANT_LABEL[m]}
                  </Button>
                </PostForm>
              ))}
            </div>
          </div>
        ) : (
          <p id="cannot-write">Connecting, verifying and revoking need the admin role in this project.</p>
        )}
        <h2>Providers</h2>
        <Table
          caption={`The catalog's ${catalog.length} providers`}
          id="providers"
          rows={catalog}
          columns={[
            { label: 'Provider', cell: (p) => p.name },
            { label: 'Server', cell: (p) => <code>{p.id}</code> },
            { label: 'Category', cell: (p) => p.category },
            { label: 'Credential', cell: (p) => p.auth_type },
            { label: 'Here', cell: (p) => (connected.has(p.id) ? <Badge tone="ok">connected</Badge> : '—') },
          ]}
        />
      </Shell>,
      refusal ? 409 : 200,
    );
  };

  const gate = (req: FastifyRequest, reply: FastifyReply) => writeRefused(deps, req, reply, 'connections');
  const connectionOf = async (req: FastifyRequest, reply: FastifyReply): Promise<ConnectionRow | null> => {
    const id = (req.params as { id: string }).id;
    const c = ID.test(id) ? await readConnection(deps, tenantOf(req.person!), id) : undefined;
    if (c) return c;
    notFoundIn(reply, req.person!, 'connections', 'connection', { href: '/dashboard/connections', label: 'the connections' });
    return null;
  };
  const back = (req: FastifyRequest) => `/dashboard/connections/${encodeURIComponent((req.params as { id: string }).id)}`;

  app.get('/dashboard/connections', { preHandler: signedIn }, (req, reply) => listPage(req, reply));

  app.get('/dashboard/connections/:id', { preHandler: signedIn }, async (req, reply) => {
    const c = await connectionOf(req, reply);
    if (!c) return reply;
    const person = req.person!;
    const writer = await adminHere(deps, person);
    const now = deps.now();
    const base = `/dashboard/connections/${encodeURIComponent(c.id)}`;
    return sendPage(
      reply,
      <Shell person={person} title={`Connection to ${c.display_name ?? c.server_id}`} active="connections" path={base} notice={takeFlash(req, reply)} styles={['flows.css']}>
        <p class="lede">
          <a href="/dashboard/connections">All connections</a>
        </p>
        <dl class="facts">
          <dt>Status</dt>
          <dd id="connection-status">
            <ConnectionStatus status={c.status} />
          </dd>
          <dt>Server</dt>
          <dd>
            <code>{c.server_id}</code>
          </dd>
          <dt>Id</dt>
          <dd>
            <code id="connection-id">{c.id}</code>
          </dd>
          <dt>End user</dt>
          <dd>{c.user_id ?? 'the whole project'}</dd>
          <dt>Credential</dt>
          <dd>{c.auth_type}: kept encrypted, never shown</dd>
          <dt>Created</dt>
          <dd>
            <Time iso={c.created_at} now={now} />
          </dd>
          {c.revoked_at ? (
            <>
              <dt>Revoked</dt>
              <dd>
                <Time iso={c.revoked_at} now={now} />
              </dd>
            </>
          ) : null}
        </dl>
        {writer && c.status !== 'revoked' ? (
          <div class="actions">
            <PostForm action={`${base}/verify`} csrf={person.csrfToken} inline>
              <Button kind="secondary" id="verify">
                Verify with the provider
              </Button>
            </PostForm>
            <PostForm action={`${base}/revoke`} csrf={person.csrfToken} inline>
              <Button kind="danger" id="revoke">
                Revoke
              </Button>
            </PostForm>
          </div>
        ) : null}
      </Shell>,
    );
  });

  action(app, deps, signedIn, '/dashboard/connections/:id/verify', {
    active: 'connections',
    back,
    refusal: (r) => `Not verified: ${rejectionText(r)}`,
    act: async (req, person, reply) => {
      const c = await connectionOf(req, reply);
      if (!c) return SENT;
      const r = await verifyConnection(deps, providerOf(deps, c.server_id), { ...tenantOf(person), environment: person.environment }, c.user_id, String(req.id));
      return `Verified: ${c.server_id} accepted the stored credential (${r.latency_ms} ms)${r.account?.name ? `, account ${r.account.name}` : ''}.`;
    },
  });

  action(app, deps, signedIn, '/dashboard/connections/:id/revoke', {
    active: 'connections',
    back,
    act: async (req, person, reply) => {
      const c = await connectionOf(req, reply);
      if (!c) return SENT;
      const r = await revokeConnection({ ports: deps, tenant: tenantOf(person), run: projectRun(deps, req, person) }, c.id);
      return r.already ? 'It was already revoked.' : 'Revoked: the credential is deleted; calls through it are refused.';
    },
  });

  for (const merchant of HOSTED_MERCHANTS) {
    app.post(`/dashboard/connections/hosted/${merchant}`, { preHandler: signedIn }, async (req, reply) => {
      if (await gate(req, reply)) return reply;
      try {
        return await listPage(req, reply, await startHostedConnect(hostedCtx(req, req.person!), worker, merchant));
      } catch (err) {
        if (!(err instanceof Rejection)) throw err;
        flash(reply, `The shop's browser could not be opened: ${rejectionText(err)}`, 'error');
        return reply.redirect('/dashboard/connections', 303);
      }
    });

    app.post(`/dashboard/connections/hosted/${merchant}/finish`, { preHandler: signedIn }, async (req, reply) => {
      if (await gate(req, reply)) return reply;
      const sessionId = String((req.body as Record<string, unknown> | undefined)?.session_id ?? '');
      try {
        if (!SESSION.test(sessionId)) throw new Rejection('not_found', 'no hosted connect session has that id');
        const r = await finishHostedConnect(hostedCtx(req, req.person!), merchant, sessionId, { mayForward: false });
        flash(reply, `Connected: your ${MERCHANT_LABEL[merchant]} login is stored.`);
        return reply.redirect(`/dashboard/connections/${encodeURIComponent(r.connection.id)}`, 303);
      } catch (err) {
        // Not logged in yet: the same panel again, to finish once logged in through the live view still open.
        if (err instanceof Rejection && err.code === 'not_logged_in') return listPage(req, reply, { merchant, session_id: sessionId }, 'You have not logged in yet: log in through the live view, then finish.');
        if (err instanceof OwnedElsewhere) flash(reply, 'That browser runs on another instance of the service: finish from the application, or start again here.', 'error');
        else if (err instanceof Rejection) flash(reply, rejectionText(err), 'error');
        else throw err;
        return reply.redirect('/dashboard/connections', 303);
      }
    });
  }
}

/** A hosted connect started: its live view (when just started), the way to finish. */
type Started = Pick<HostedStart, 'merchant' | 'session_id'> & Partial<Pick<HostedStart, 'live_view_url' | 'note'>>;

/** A hosted connect just started: open the live view, log in, then finish here. */
function HostedStarted({ started, csrf }: { started: Started; csrf: string }) {
  return (
    <div class="panel" id="hosted-started">
      <h2>Log in to {MERCHANT_LABEL[started.merchant]}</h2>
      <ol>
        <li>
          {started.live_view_url ? (
            <a href={started.live_view_url} target="_blank" rel="noopener noreferrer" id="live-view-link">
              Open the live view
            </a>
          ) : (
            'Open the live view'
          )}{' '}
          (a new tab) and log in there yourself.
        </li>
        <li>Come back and finish: your login is stored as a connection.</li>
      </ol>
      {started.note ? <p>{started.note}</p> : null}
      <PostForm action={`/dashboard/connections/hosted/${started.merchant}/finish`} csrf={csrf} id="finish-hosted">
        <input type="hidden" name="session_id" value={started.session_id} />
        <Button id="finish">I have logged in: finish</Button>
      </PostForm>
    </div>
  );
}
