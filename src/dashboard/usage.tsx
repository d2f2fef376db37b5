import type { FastifyInstance, preHandlerHookHandler } from 'fastify';
import { usageSummary, type KeyRate } from '../usecases/usage.ts';
import { Badge, Table } from './components.tsx';
import { type DashboardDeps, takeFlash } from './context.ts';
import { Shell, sendPage } from './layout.tsx';
import { formatMinor, minorDigits } from './money.ts';
import { lastDays, SeriesChart, seriesOf } from './usage-chart.tsx';

// Usage and billing: for the project chosen in the header, the API requests
// per day per key and the approved spends per day per credential (charts,
// with the figures as tables), and each key against the per-key rate limit:
// its requests, the requests the limiter refused, and how full its bucket got
// (100 % is the moment it refuses). Read-only.

const DAYS = 14;
const pct = (f: number) => `${Math.round(f * 100)}\u00a0%`;

function RateTable({ keys, limit }: { keys: readonly KeyRate[]; limit: { burst: number; perSecond: number } | undefined }) {
  return (
    <section aria-labelledby="limits-title" class="panel">
      <h2 id="limits-title">Rate limits</h2>
      <p id="limit-text">
        {limit
          ? `Each API key may make a burst of ${limit.burst} requests, refilled at ${limit.perSecond} a second; beyond that the API answers 429 rate_limited with Retry-After. The fullest shows how close a key came: 100 % is a refusal.`
          : 'The rate limit is not known to this instance.'}
      </p>
      <Table
        id="keys-usage"
        caption={`API keys of this project, the last ${DAYS} days`}
        rows={keys}
        columns={[
          { label: 'Key', cell: (k) => <span id={k.key_id}>{k.name} <code>{k.key_prefix}…</code> {k.revoked ? <Badge>revoked</Badge> : null}</span> },
          { label: 'Environment', cell: (k) => k.environment },
          { label: 'Requests today', cell: (k) => k.requests_today, numeric: true },
          { label: `Requests, ${DAYS} days`, cell: (k) => k.requests_window, numeric: true },
          { label: 'Refused (429)', cell: (k) => (k.limited_window > 0 ? <Badge tone="danger">{k.limited_window}</Badge> : 0), numeric: true },
          {
            label: 'Fullest today',
            cell: (k) => (
              <>
                <meter min={0} max={1} low={0.5} high={0.9} optimum={0} value={k.peak_today} aria-label={`${k.name}: bucket ${pct(k.peak_today)} full at most today`} /> {pct(k.peak_today)}
              </>
            ),
          },
          { label: `Fullest, ${DAYS} days`, cell: (k) => pct(k.peak_window), numeric: true },
        ]}
      />
    </section>
  );
}

export async function usageRoutes(app: FastifyInstance, deps: DashboardDeps, signedIn: preHandlerHookHandler): Promise<void> {
  app.get('/dashboard/usage', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const now = deps.now();
    const s = await usageSummary(deps.db, deps.keyUsage, { orgId: person.orgId, projectId: person.projectId }, now, DAYS);
    const days = lastDays(now, DAYS);
    const names = new Map(s.keys.map((k) => [k.key_id, `${k.name} (${k.key_prefix}…)`]));
    const nameOf = (id: string) => names.get(id) ?? (id.startsWith('usr_') ? 'a person (approval)' : id);
    const requests = seriesOf(s.requests, days, (r) => nameOf(r.key_id), (r) => String(r.requests), (r) => r.day);
    const currencies = [...new Set(s.spends.map((r) => r.currency))];
    const project = person.projects.find((p) => p.id === person.projectId);
    return sendPage(
      reply,
      <Shell person={person} title="Usage" active="usage" path="/dashboard/usage" notice={takeFlash(req, reply)} scripts={['locale-guard.js', 'uplot.js', 'series-chart.js']} styles={['uplot.css']}>
        <p class="lede">
          Project <strong>{project?.name ?? person.projectId}</strong>, the last {DAYS} days (UTC). Requests are counted per key as they arrive; another instance's show within about a minute.
        </p>
        <SeriesChart id="requests" title="API requests per day" empty={`No API requests in this project in the last ${DAYS} days.`} days={days} series={requests} digits={0} format={(v) => v} describe="API requests per day, a line per key" />
        {currencies.length === 0 ? (
          <SeriesChart id="spends" title="Spends per day" empty={`No approved spends in this project in the last ${DAYS} days.`} days={days} series={[]} digits={0} format={(v) => v} describe="Approved spends per day" />
        ) : (
          currencies.map((c) => (
            <SeriesChart
              id={`spends-${c.toLowerCase()}`}
              title={`Spends per day in ${c}`}
              empty=""
              days={days}
              series={seriesOf(s.spends.filter((r) => r.currency === c), days, (r) => nameOf(r.actor_id), (r) => r.amount_minor, (r) => r.day)}
              digits={minorDigits(c)}
              format={(v) => formatMinor(v, c)}
              describe={`Approved spends per day in ${c}, a line per key that made them`}
            />
          ))
        )}
        <RateTable keys={s.keys} limit={s.limit} />
      </Shell>,
    );
  });
}
