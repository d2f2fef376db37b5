import type { FastifyInstance, FastifyRequest, preHandlerHookHandler } from 'fastify';
import { getPreferences, readCounterparty } from '../usecases/commerce-memory.ts';
import { insightTopCounterparties } from '../usecases/commerce-memory-insights.ts';
import { counterpartyPage, interactionPage } from '../usecases/commerce-memory-pages.ts';
import { Badge, EmptyState, Pagination, Table, Time } from './components.tsx';
import { type DashboardDeps, takeFlash } from './context.ts';
import { Shell, sendPage } from './layout.tsx';
import { formatMinor } from './money.ts';

// Commerce memory: what the project's agents learned about whom they trade
// with. The top counterparties by payments over the last 30 days (the
// insights), the counterparties by last seen (by cursor), and one
// counterparty's page: who it is, its preferences, its interactions. Read-only.

const PAGE = 50;
const WINDOW_DAYS = 30;
const ID = /^cp_[A-Za-z0-9]{16}$/;
const cursorOf = (req: FastifyRequest) => {
  const c = (req.query as Record<string, unknown> | undefined)?.cursor;
  return typeof c === 'string' ? c : undefined;
};
const KIND_TEXT: Record<string, string> = { supplier: 'supplier', customer: 'customer', agent_peer: 'another agent' };

/** A preference value as text (never raw JSON). */
function text(v: unknown): string {
  if (v === null || v === undefined) return '—';
  if (Array.isArray(v)) return v.map(text).join(', ');
  if (typeof v === 'object') return Object.entries(v as Record<string, unknown>).map(([k, x]) => `${k.replaceAll('_', ' ')}: ${text(x)}`).join('; ');
  return String(v);
}

export async function memoryRoutes(app: FastifyInstance, deps: DashboardDeps, signedIn: preHandlerHookHandler): Promise<void> {
  app.get('/dashboard/memory', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const tenant = { orgId: person.orgId, projectId: person.projectId };
    const now = deps.now();
    const cursor = cursorOf(req);
    const [top, list] = await Promise.all([insightTopCounterparties(deps, tenant, { limit: 10 }, { since: new Date(now.getTime() - WINDOW_DAYS * 86_400_000), until: now }), counterpartyPage(deps.db, tenant, cursor, PAGE)]);
    return sendPage(
      reply,
      <Shell person={person} title="Commerce memory" active="memory" path="/dashboard/memory" notice={takeFlash(req, reply)} styles={['flows.css']}>
        <p class="lede">Whom this project's agents trade with, and what they learned: recorded by the agents through the API, read here.</p>
        <h2 id="top-title">Most paid, the last {WINDOW_DAYS} days</h2>
        {top.length === 0 ? (
          <EmptyState title={`No payments recorded in the last ${WINDOW_DAYS} days.`} />
        ) : (
          <Table
            id="top"
            caption={`Counterparties by payments, the last ${WINDOW_DAYS} days`}
            rows={top}
            columns={[
              { label: 'Counterparty', cell: (r) => <a href={`/dashboard/memory/${encodeURIComponent(r.counterparty_id)}`}>{r.name}</a> },
              { label: 'Kind', cell: (r) => KIND_TEXT[r.kind] ?? r.kind },
              { label: 'Payments', cell: (r) => r.payment_count, numeric: true },
              { label: 'Total (minor units, all currencies)', cell: (r) => r.total_payment_minor.toString(), numeric: true },
            ]}
          />
        )}
        <h2 id="counterparties-title">Counterparties</h2>
        {list.rows.length === 0 ? (
          <EmptyState title="No counterparties yet.">
            <p>Agents register them through /v1/commerce-memory.</p>
          </EmptyState>
        ) : (
          <>
            <Table
              id="counterparties"
              caption="Counterparties, last seen first"
              rows={list.rows}
              columns={[
                { label: 'Name', cell: (r) => <a href={`/dashboard/memory/${encodeURIComponent(r.id)}`} data-counterparty={r.id}>{r.name}</a> },
                { label: 'Kind', cell: (r) => KIND_TEXT[r.kind] ?? r.kind },
                { label: 'Identifier', cell: (r) => (r.identifier ? `${r.identifier_kind ?? ''} ${r.identifier}`.trim() : '—') },
                { label: 'Last seen', cell: (r) => <Time iso={r.last_seen_at} now={now} /> },
              ]}
            />
            <Pagination prev={cursor ? '/dashboard/memory' : undefined} next={list.next ? `/dashboard/memory?cursor=${list.next}` : undefined} />
          </>
        )}
      </Shell>,
    );
  });

  app.get('/dashboard/memory/:id', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const tenant = { orgId: person.orgId, projectId: person.projectId };
    const id = (req.params as { id: string }).id;
    const c = ID.test(id) ? await readCounterparty(deps, tenant, id) : undefined;
    if (!c)
      return sendPage(
        reply,
        <Shell person={person} title="No such counterparty" active="memory">
          <p id="not-found">
            This project has no counterparty with that id. See <a href="/dashboard/memory">commerce memory</a>, or switch project.
          </p>
        </Shell>,
        404,
      );
    const now = deps.now();
    const cursor = cursorOf(req);
    const [prefs, ix] = await Promise.all([getPreferences(deps, tenant, id), interactionPage(deps.db, id, cursor, PAGE)]);
    const base = `/dashboard/memory/${encodeURIComponent(id)}`;
    const prefEntries = Object.entries(prefs.preferences);
    return sendPage(
      reply,
      <Shell person={person} title={c.name} active="memory" path={base} notice={takeFlash(req, reply)} styles={['flows.css']}>
        <p class="lede">
          <a href="/dashboard/memory">Commerce memory</a>
        </p>
        <dl class="facts" id="counterparty-facts">
          <dt>Id</dt>
          <dd>
            <code>{c.id}</code>
          </dd>
          <dt>Kind</dt>
          <dd>{KIND_TEXT[c.kind] ?? c.kind}</dd>
          <dt>Identifier</dt>
          <dd>{c.identifier ? `${c.identifier_kind ?? ''} ${c.identifier}`.trim() : '—'}</dd>
          <dt>First seen</dt>
          <dd>
            <Time iso={c.created_at} now={now} />
          </dd>
          <dt>Last seen</dt>
          <dd>
            <Time iso={c.last_seen_at} now={now} />
          </dd>
        </dl>
        <h2 id="preferences-title">Preferences</h2>
        {prefEntries.length === 0 ? (
          <p>None recorded.</p>
        ) : (
          <dl class="facts" id="preferences">
            {prefEntries.map(([k, v]) => (
              <>
                <dt>{k.replaceAll('_', ' ')}</dt>
                <dd>{text(v)}</dd>
              </>
            ))}
          </dl>
        )}
        <h2 id="interactions-title">Interactions</h2>
        {ix.rows.length === 0 ? (
          <EmptyState title="No interactions recorded." />
        ) : (
          <>
            <Table
              id="interactions"
              caption="Interactions, newest first"
              rows={ix.rows}
              columns={[
                { label: 'Kind', cell: (r) => <Badge>{r.kind}</Badge> },
                { label: 'Amount', cell: (r) => (r.amount_minor && r.currency ? formatMinor(r.amount_minor, r.currency) : '—'), numeric: true },
                { label: 'Agent', cell: (r) => (r.agent_id ? <code>{r.agent_id}</code> : '—') },
                { label: 'Source', cell: (r) => r.source.replaceAll('_', ' ') },
                { label: 'When', cell: (r) => <Time iso={r.occurred_at} now={now} /> },
              ]}
            />
            <Pagination prev={cursor ? base : undefined} next={ix.next ? `${base}?cursor=${ix.next}` : undefined} />
          </>
        )}
      </Shell>,
    );
  });
}
