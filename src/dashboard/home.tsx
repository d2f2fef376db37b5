import type { FastifyInstance, preHandlerHookHandler } from 'fastify';
import { homeSummary, type DaySpend, type HomeSummary } from '../usecases/home.ts';
import { Badge, type Column, EmptyState, Table } from './components.tsx';
import { type DashboardDeps, takeFlash } from './context.ts';
import { Shell, sendPage } from './layout.tsx';
import { formatMinor, minorDigits } from './money.ts';
import type { Person } from './session.ts';
import { HOME_SPEND_DAYS } from '../limits.ts';

// Home: the current project at a glance (agents, active mandates, spends
// today, pending approvals, the audit chain's health) and the approved spends
// per day as a chart (uPlot, drawn from the table beside it, which is what a
// browser without JavaScript, or a screen reader, reads).

const HEALTH_TONE: Record<string, 'ok' | 'warn' | 'danger'> = { healthy: 'ok', degraded: 'warn', broken: 'danger' };

function Card({ id, label, value, href }: { id: string; label: string; value: string | number; href?: string }) {
  return (
    <div class="card" id={id}>
      <div class="label">{label}</div>
      <div class="value">{href ? <a href={href}>{value}</a> : value}</div>
    </div>
  );
}

function Summary({ s }: { s: HomeSummary }) {
  const today = s.spends_today.length === 0 ? 'none' : s.spends_today.map((x) => formatMinor(x.amount_minor, x.currency)).join(' · ');
  return (
    <section aria-labelledby="summary-title">
      <h2 id="summary-title" class="visually-hidden">
        Summary
      </h2>
      <div class="cards">
        <Card id="card-agents" label="Agents" value={s.agents} />
        <Card id="card-mandates" label="Active mandates" value={s.active_mandates} />
        <Card id="card-spends" label="Spends today" value={today} />
        <Card id="card-approvals" label="Pending approvals" value={s.pending_approvals} href="/dashboard/approvals" />
        <div class="card" id="card-audit">
          <div class="label">Audit chain</div>
          <div class="value">
            <a href="/dashboard/audit">
              <Badge tone={HEALTH_TONE[s.audit.status] ?? 'warn'}>{s.audit.status}</Badge>
            </a>
          </div>
          <div class="label">{s.audit.detail}</div>
        </div>
      </div>
    </section>
  );
}

function SpendChart({ days }: { days: DaySpend[] }) {
  const columns: Column<DaySpend>[] = [
    { label: 'Day (UTC)', cell: (d) => d.day },
    { label: 'Spends', cell: (d) => d.count, numeric: true },
    { label: 'Amount', cell: (d) => formatMinor(d.amount_minor, d.currency), numeric: true },
  ];
  const currency = days[0]?.currency;
  return (
    <section aria-labelledby="spends-title" class="panel">
      <h2 id="spends-title">Spends per day</h2>
      {days.length === 0 ? (
        <EmptyState title={`No approved spends in the last ${HOME_SPEND_DAYS} days.`} />
      ) : (
        <>
          <div class="chart" id="spends-chart" role="img" aria-label={`Approved spends per day in ${currency}, the last ${HOME_SPEND_DAYS} days; the table below has the figures.`} data-currency={currency} data-digits={String(minorDigits(currency!))} data-days={String(HOME_SPEND_DAYS)} />
          <Table caption={`Approved spends, the last ${HOME_SPEND_DAYS} days`} columns={columns} rows={days} id="spends-table" />
          {/* The chart reads its points from here (a JSON data block is not a script: the CSP allows it). */}
          <script type="application/json" id="spends-data" dangerouslySetInnerHTML={{ __html: JSON.stringify(days.filter((d) => d.currency === currency).map((d) => [d.day, d.amount_minor])).replace(/</g, '\\u003c') }} />
        </>
      )}
    </section>
  );
}

export async function homeRoutes(app: FastifyInstance, deps: DashboardDeps, signedIn: preHandlerHookHandler): Promise<void> {
  app.get('/dashboard', { preHandler: signedIn }, async (req, reply) => {
    const person: Person = req.person!;
    const org = person.orgs.find((o) => o.orgId === person.orgId);
    const project = person.projects.find((p) => p.id === person.projectId);
    const s = await homeSummary(deps, person.orgId, person.projectId);
    return sendPage(
      reply,
      <Shell person={person} title={org?.name ?? 'Home'} active="home" path="/dashboard" notice={takeFlash(req, reply)} scripts={['locale-guard.js', 'uplot.js', 'chart.js']} styles={['uplot.css']}>
        <p id="welcome">
          Signed in as {person.email}. Project <strong>{project?.name ?? person.projectId}</strong> ({project?.environment ?? 'test'} project).
        </p>
        <Summary s={s} />
        <SpendChart days={s.spends_per_day} />
      </Shell>,
    );
  });
}
