import type { FastifyInstance, FastifyReply, FastifyRequest, preHandlerHookHandler } from 'fastify';
import { Rejection } from '../eventstore/handler.ts';
import type { UseCaseCtx } from '../usecases/context.ts';
import { earningsPerDay, paidCallPage, sweepPage } from '../usecases/mcp-earnings.ts';
import { actingRoleOf, listServers, patchTool, readServer, sweepPlatformFees, toolsOf } from '../usecases/mcp-servers.ts';
import { Button, PostForm } from './components.tsx';
import { atLeast, csrfOk, type DashboardDeps, flash, formField, personRun, rejectionText, takeFlash } from './context.ts';
import { Shell, sendPage } from './layout.tsx';
import { CallTable, EarningsChart, ServerTable, SweepTable, ToolTable, usdc } from './mcp-servers-view.tsx';
import { refusedPage, roleRefusedPage } from './refused.tsx';
import type { Person } from './session.ts';
import type { Role } from '../../commands/org.ts';

// MCP servers: the project's paid MCP servers, the earnings and platform fees
// per day (chart and table), one server's tools with their prices, its paid
// calls and its fee sweeps. Changing a price and sweeping the fees are the
// same use cases as PATCH /v1/mcp-servers/:id/tools/:tool and POST
// /v1/mcp-servers/platform-fees/sweep, for an admin in the project (as the
// API's x-svc-user check), the person recorded as actor.

const DAYS = 14;
const PAGE = 50;
const ID = /^mcs_[A-Za-z0-9]{16}$/;
const CHARTS = { scripts: ['locale-guard.js', 'uplot.js', 'series-chart.js'], styles: ['uplot.css', 'flows.css'] } as const;

const tenantOf = (p: Person) => ({ orgId: p.orgId, projectId: p.projectId });
const useCase = (deps: DashboardDeps, req: FastifyRequest, p: Person): UseCaseCtx => ({ ports: deps, tenant: tenantOf(p), actor: { kind: 'user', id: p.userId }, requestId: String(req.id), run: personRun(deps, req, p) });
/** Admin in the server's project, as the API resolves x-svc-user (an owner stays owner, else the project's override or the organization role). */
const mayChange = async (deps: DashboardDeps, p: Person) => {
  const acting = await actingRoleOf(deps.db, tenantOf(p), p.userId);
  return acting !== undefined && ['member', 'admin', 'owner'].includes(acting.role) && atLeast(acting.role as Role, 'admin');
};
const q = (req: FastifyRequest, name: string) => {
  const v = (req.query as Record<string, unknown> | undefined)?.[name];
  return typeof v === 'string' ? v : undefined;
};

export async function mcpServerRoutes(app: FastifyInstance, deps: DashboardDeps, signedIn: preHandlerHookHandler): Promise<void> {
  app.get('/dashboard/mcp-servers', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const now = deps.now();
    const [servers, earnings, admin] = await Promise.all([listServers(deps, tenantOf(person)), earningsPerDay(deps.db, tenantOf(person), since(now)), mayChange(deps, person)]);
    return sendPage(
      reply,
      <Shell person={person} title="MCP servers" active="mcp" path="/dashboard/mcp-servers" notice={takeFlash(req, reply)} {...CHARTS}>
        <p class="lede">Your MCP servers sell their tools per call through the paying gateway; each paid call settles in USDC to the server's address, less the platform fee.</p>
        <ServerTable servers={servers} />
        <EarningsChart id="earnings" rows={earnings} now={now} days={DAYS} />
        {admin && servers.length > 0 ? (
          <section aria-labelledby="sweep-title" class="panel">
            <h2 id="sweep-title">Platform fees</h2>
            <p>Move every platform fee not yet swept, from each server's address to the platform wallet, on chain.</p>
            <PostForm action="/dashboard/mcp-servers/sweep" csrf={person.csrfToken} id="sweep-form">
              <Button kind="secondary" id="sweep">
                Sweep the fees now
              </Button>
            </PostForm>
          </section>
        ) : null}
      </Shell>,
    );
  });

  app.get('/dashboard/mcp-servers/:id', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const id = (req.params as { id: string }).id;
    const server = ID.test(id) ? await readServer(deps.db, tenantOf(person), id) : undefined;
    if (!server) return notFound(reply, person);
    const now = deps.now();
    const base = `/dashboard/mcp-servers/${encodeURIComponent(server.id)}`;
    const [tools, earnings, calls, sweeps, admin] = await Promise.all([
      toolsOf(deps.db, server.id),
      earningsPerDay(deps.db, tenantOf(person), since(now), server.id),
      paidCallPage(deps.db, server.id, q(req, 'calls'), PAGE),
      sweepPage(deps.db, server.id, q(req, 'sweeps'), PAGE),
      mayChange(deps, person),
    ]);
    return sendPage(
      reply,
      <Shell person={person} title={server.name} active="mcp" path={base} notice={takeFlash(req, reply)} {...CHARTS}>
        <p class="lede">
          <a href="/dashboard/mcp-servers">All MCP servers</a>
        </p>
        <dl class="facts" id="server-facts">
          <dt>Id</dt>
          <dd>
            <code>{server.id}</code>
          </dd>
          <dt>Slug</dt>
          <dd>
            <code>{server.slug}</code>
          </dd>
          <dt>Status</dt>
          <dd>{server.active ? 'active: its tools are on sale' : 'inactive'}</dd>
          <dt>Environment</dt>
          <dd>{server.environment === 'live' ? 'live (real USDC)' : 'test (test network)'}</dd>
          <dt>Paid to</dt>
          <dd>
            <code>{server.payto_address}</code> ({server.payto_kind})
          </dd>
          <dt>Platform fee</dt>
          <dd>{(server.platform_fee_bps / 100).toFixed(2)} % of each call</dd>
        </dl>
        <h2 id="tools-title">Tools</h2>
        <ToolTable server={server} tools={tools} csrf={person.csrfToken} mayChange={admin} />
        {admin ? null : <p id="cannot-change">Changing prices needs the admin role in this project; ask an admin or owner.</p>}
        <EarningsChart id="earnings" rows={earnings} now={now} days={DAYS} />
        <h2 id="calls-title">Paid calls</h2>
        <CallTable rows={calls.rows} now={now} prev={q(req, 'calls') ? base : undefined} next={calls.next ? `${base}?calls=${calls.next}#calls-title` : undefined} />
        <h2 id="sweeps-title">Fee sweeps</h2>
        <SweepTable rows={sweeps.rows} prev={q(req, 'sweeps') ? base : undefined} next={sweeps.next ? `${base}?sweeps=${sweeps.next}#sweeps-title` : undefined} />
      </Shell>,
    );
  });

  app.post('/dashboard/mcp-servers/:id/tools/:tool/price', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    if (!csrfOk(req, deps.baseUrl, person)) return refusedPage(reply);
    const { id, tool } = req.params as { id: string; tool: string };
    const server = ID.test(id) ? await readServer(deps.db, tenantOf(person), id) : undefined;
    if (!server) return notFound(reply, person);
    if (!(await mayChange(deps, person))) return roleRefusedPage(reply, person, 'admin', 'mcp');
    const back = `/dashboard/mcp-servers/${encodeURIComponent(server.id)}`;
    const price = formField(req.body, 'price').trim();
    try {
      const updated = await patchTool(useCase(deps, req, person), server.id, tool.slice(0, 128), { price });
      const now = (await toolsOf(deps.db, updated.id)).find((t) => t.tool_name === tool);
      flash(reply, `${tool} now costs ${now ? usdc(now.price_atomic) : price} a call, from the next call.`);
    } catch (err) {
      if (!(err instanceof Rejection)) throw err;
      flash(reply, err.code === 'invalid_body' ? `“${price.slice(0, 40)}” is not a price: enter USDC such as 0.25 (at most 6 decimals). Nothing was changed.` : rejectionText(err), 'error');
    }
    return reply.redirect(back, 303);
  });

  app.post('/dashboard/mcp-servers/sweep', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    if (!csrfOk(req, deps.baseUrl, person)) return refusedPage(reply);
    if (!(await mayChange(deps, person))) return roleRefusedPage(reply, person, 'admin', 'mcp');
    try {
      const out = await sweepPlatformFees(useCase(deps, req, person));
      flash(reply, out.swept === 0 ? 'Nothing to sweep: every fee was already swept.' : `Swept ${usdc(out.total_atomic)} from ${out.swept} server${out.swept === 1 ? '' : 's'}.`);
    } catch (err) {
      if (!(err instanceof Rejection)) throw err;
      flash(reply, err.code === 'sweep_in_progress' ? 'Another sweep is running: try again in a minute.' : rejectionText(err), 'error');
    }
    return reply.redirect('/dashboard/mcp-servers', 303);
  });
}

const since = (now: Date) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()) - (DAYS - 1) * 86_400_000);

function notFound(reply: FastifyReply, person: Person) {
  return sendPage(
    reply,
    <Shell person={person} title="No such MCP server" active="mcp" notice={{ text: 'Nothing was changed.', tone: 'error' }}>
      <p id="not-found">
        This project has no MCP server with that id. See the <a href="/dashboard/mcp-servers">MCP servers</a>, or switch project.
      </p>
    </Shell>,
    404,
  );
}
