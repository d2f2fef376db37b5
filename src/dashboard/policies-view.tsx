import type { PolicyRow } from '../usecases/policies.ts';
import type { DecisionCounts, DecisionRow, Outcome } from '../usecases/policy-decisions.ts';
import { Badge, Button, Csrf, EmptyState, Pagination, Table, Time } from './components.tsx';
import { formatMinor } from './money.ts';

// What the policies pages show: the policies in evaluation order with the
// decisions each made, one policy's settings in words, and decisions as a
// table (outcome, what was asked, by which agent, why). Never raw JSON.

export const OUTCOME_TEXT: Record<Outcome, string> = { allowed: 'allowed', approval_required: 'held', denied: 'denied' };
const OUTCOME_TONE = { allowed: 'ok', approval_required: 'warn', denied: 'danger' } as const;
export const OutcomeBadge = ({ d }: { d: Outcome }) => <Badge tone={OUTCOME_TONE[d]}>{OUTCOME_TEXT[d]}</Badge>;

/** What a policy type does, in a sentence. */
export const TYPE_TEXT: Record<string, string> = {
  allow: 'Allows the calls it matches (later policies are not asked).',
  deny: 'Refuses the calls it matches.',
  budget: 'Refuses a call that would take the spending in its window past the budget.',
  'rate-limit': 'Refuses calls beyond a number per window.',
  'time-window': 'Refuses calls outside the days and hours it names.',
  'approval-required': 'Holds the calls it matches until a person approves them (see Approvals).',
};

/** A config value as text: lists joined, nested objects as key: value pairs. */
function valueText(v: unknown): string {
  if (v === null || v === undefined) return '—';
  if (Array.isArray(v)) return v.map(valueText).join(', ') || '—';
  if (typeof v === 'object') return Object.entries(v as Record<string, unknown>).map(([k, x]) => `${k.replaceAll('_', ' ')}: ${valueText(x)}`).join('; ');
  return String(v);
}

export function PolicySettings({ p }: { p: PolicyRow }) {
  const config = Object.entries(p.config);
  return (
    <dl class="facts" id="policy-facts">
      <dt>Type</dt>
      <dd id="policy-type">
        <code>{p.type}</code>: {TYPE_TEXT[p.type] ?? ''}
      </dd>
      <dt>Status</dt>
      <dd id="policy-status">{p.enabled ? <Badge tone="ok">enabled</Badge> : <Badge>disabled</Badge>}</dd>
      <dt>Order</dt>
      <dd>{p.ord + 1}</dd>
      <dt>Agents</dt>
      <dd>{p.agents.length ? p.agents.join(', ') : 'every agent'}</dd>
      <dt>Tools</dt>
      <dd>{p.tools.length ? p.tools.join(', ') : 'every tool'}</dd>
      {config.map(([k, v]) => (
        <>
          <dt>{k.replaceAll('_', ' ')}</dt>
          <dd>{valueText(v)}</dd>
        </>
      ))}
    </dl>
  );
}

const EMPTY: DecisionCounts = { allowed: 0, approval_required: 0, denied: 0 };

export function PolicyTable({ policies, counts }: { policies: readonly PolicyRow[]; counts: ReadonlyMap<string, DecisionCounts> }) {
  if (policies.length === 0)
    return (
      <EmptyState title="No policies yet.">
        <p>Without a policy every call an agent makes within its mandate is allowed.</p>
      </EmptyState>
    );
  return (
    <Table
      id="policies"
      caption="Policies, in the order they are asked"
      rows={policies}
      columns={[
        { label: 'Policy', cell: (p) => <a href={`/dashboard/policies/${encodeURIComponent(p.id)}`} data-policy={p.id}>{p.name}</a> },
        { label: 'Type', cell: (p) => <code>{p.type}</code> },
        { label: 'Status', cell: (p) => (p.enabled ? <Badge tone="ok">enabled</Badge> : <Badge>disabled</Badge>) },
        { label: 'Allowed', cell: (p) => (counts.get(p.id) ?? EMPTY).allowed, numeric: true },
        { label: 'Held', cell: (p) => (counts.get(p.id) ?? EMPTY).approval_required, numeric: true },
        { label: 'Denied', cell: (p) => (counts.get(p.id) ?? EMPTY).denied, numeric: true },
      ]}
    />
  );
}

const asked = (d: DecisionRow) => `${d.tool_name}${d.amount_minor && d.currency ? ` (${formatMinor(d.amount_minor, d.currency)})` : ''}`;

export function DecisionTable({ rows, now, names, prev, next, caption }: { rows: readonly DecisionRow[]; now: Date; names: ReadonlyMap<string, string>; prev?: string | undefined; next?: string | undefined; caption: string }) {
  if (rows.length === 0) return <EmptyState title="No decisions here yet." />;
  return (
    <>
      <Table
        id="decisions"
        caption={caption}
        rows={rows}
        columns={[
          { label: 'Outcome', cell: (d) => <OutcomeBadge d={d.decision} /> },
          { label: 'Asked', cell: (d) => asked(d) },
          { label: 'Agent', cell: (d) => <code>{d.agent_id}</code> },
          { label: 'Policy', cell: (d) => (d.rule_id ? <a href={`/dashboard/policies/${encodeURIComponent(d.rule_id)}`}>{names.get(d.rule_id) ?? d.rule_id}</a> : 'none decisive') },
          { label: 'Why', cell: (d) => (d.approval_id ? <a href={`/dashboard/approvals/${encodeURIComponent(d.approval_id)}`}>approval {d.approval_id}</a> : (d.reason?.replaceAll('_', ' ') ?? '—')) },
          { label: 'When', cell: (d) => <Time iso={d.at} now={now} /> },
        ]}
      />
      <Pagination prev={prev} next={next} />
    </>
  );
}

export function DecisionFilter({ action, value }: { action: string; value: string }) {
  return (
    <form method="get" action={action} class="filters" id="decision-filter">
      <div class="field">
        <label for="decision">Outcome</label>
        <select id="decision" name="decision">
          <option value="" selected={value === ''}>
            Any
          </option>
          {(['allowed', 'approval_required', 'denied'] as const).map((o) => (
            <option value={o} selected={value === o}>
              {OUTCOME_TEXT[o]}
            </option>
          ))}
        </select>
      </div>
      <Button kind="secondary">Show</Button>
    </form>
  );
}

export function EnableForm({ p, csrf }: { p: PolicyRow; csrf: string }) {
  return (
    <form method="post" action={`/dashboard/policies/${encodeURIComponent(p.id)}/enabled`} id="enable-form" class="actions">
      <Csrf token={csrf} />
      <input type="hidden" name="enabled" value={p.enabled ? 'false' : 'true'} />
      <Button kind={p.enabled ? 'danger' : 'primary'} id="toggle-policy">
        {p.enabled ? 'Disable this policy' : 'Enable this policy'}
      </Button>
    </form>
  );
}
