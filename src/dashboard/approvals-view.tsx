import type { ApprovalRow } from '../usecases/approvals.ts';
import { Badge, Button, Csrf, EmptyState, Table, Time } from './components.tsx';
import { formatMinor } from './money.ts';

// What the approvals pages show: the queue (what is asked, by whom, under
// which policy, how long is left), the history, and one approval with its
// input verbatim and the form that decides it. Live regions reload themselves
// through htmx when the page's event stream says something changed
// (assets/live.js); each is also served alone (?fragment=1).

/** An amount of the held call's input (amount_minor and currency) as a person reads it, or null when it names none. */
export function amountText(input: Record<string, unknown>): string | null {
  const minor = input.amount_minor;
  const currency = input.currency;
  if ((typeof minor !== 'string' && typeof minor !== 'number') || !/^\d{1,30}$/.test(String(minor)) || typeof currency !== 'string' || !/^[A-Za-z]{3,8}$/.test(currency)) return null;
  return formatMinor(String(minor), currency);
}

/** What the agent asks, in words: a spend with its amount, or the tool it wants to run. */
export function askText(a: Pick<ApprovalRow, 'tool_name' | 'tool_input'>): string {
  const amount = amountText(a.tool_input);
  if (a.tool_name === 'mandate.spend') return `Spend ${amount ?? '(amount not given)'}${typeof a.tool_input.merchant === 'string' ? ` at ${a.tool_input.merchant}` : ''}`;
  if (a.tool_name === 'x402.execute') return `Pay an x402 resource${amount ? ` (${amount})` : ''}`;
  return `Run the tool ${a.tool_name}${amount ? ` (${amount})` : ''}`;
}

const TONES = { pending: 'warn', approved: 'ok', denied: 'danger', expired: 'neutral', execution_failed: 'danger' } as const;

export const StatusBadge = ({ status }: { status: ApprovalRow['status'] }) => <Badge tone={TONES[status]}>{status.replace('_', ' ')}</Badge>;

/** Who decided, by e-mail when the person is known. */
export const decidedByText = (a: Pick<ApprovalRow, 'decided_by'>, people: ReadonlyMap<string, string>) => (a.decided_by ? (people.get(a.decided_by) ?? a.decided_by) : null);

type QueuePage = { pendingAfter?: string | undefined; historyAfter?: string | undefined };

/** The queue's address continuing each list after the given row (a list without one starts at its beginning). */
const queueUrl = (p: QueuePage, extra = '') => {
  const q = new URLSearchParams();
  if (p.pendingAfter) q.set('pending_after', p.pendingAfter);
  if (p.historyAfter) q.set('history_after', p.historyAfter);
  const text = q.toString();
  return `/dashboard/approvals${text || extra ? '?' : ''}${[text, extra].filter(Boolean).join('&')}`;
};

/** "Next 50 …" after a page that has more; "First page" on a later one. */
function PageLinks({ first, more, what }: { first?: string | undefined; more?: string | undefined; what: string }) {
  if (!first && !more) return null;
  return (
    <nav class="pagination" aria-label={`More ${what}`}>
      {first ? <a href={first}>← First {what}</a> : <span />}
      {more ? <a href={more}>Next {what} →</a> : <span />}
    </nav>
  );
}

export function QueueRegion(props: {
  pending: readonly ApprovalRow[];
  history: readonly ApprovalRow[];
  nextPending: string | null;
  nextHistory: string | null;
  people: ReadonlyMap<string, string>;
  page: QueuePage;
  now: Date;
}) {
  const { pending, history, nextPending, nextHistory, people, page, now } = props;
  return (
    <div id="approvals-live" hx-get={queueUrl(page, 'fragment=1')} hx-trigger="approvals-changed from:body" hx-swap="outerHTML">
      <h2>Waiting for a decision</h2>
      {pending.length === 0 ? (
        <EmptyState title="Nothing is waiting.">
          <p>When a policy holds an agent's call, it appears here, and here it is approved or denied.</p>
        </EmptyState>
      ) : (
        <Table
          id="pending"
          caption={`${pending.length} held call${pending.length === 1 ? '' : 's'}${nextPending || page.pendingAfter ? ' on this page' : ''}, the one expiring soonest first`}
          rows={pending}
          columns={[
            { label: 'Asked', cell: (a) => <a href={`/dashboard/approvals/${encodeURIComponent(a.id)}`} data-approval={a.id}>{askText(a)}</a> },
            { label: 'Agent', cell: (a) => <code>{a.agent_id}</code> },
            { label: 'Held by policy', cell: (a) => a.matched_rule_name },
            { label: 'Time left', cell: (a) => <Time iso={a.expires_at} now={now} /> },
          ]}
        />
      )}
      <PageLinks first={page.pendingAfter ? queueUrl({ ...page, pendingAfter: undefined }) : undefined} more={nextPending ? queueUrl({ ...page, pendingAfter: nextPending }) : undefined} what="held calls" />
      <h2>Decided</h2>
      {history.length === 0 ? (
        <EmptyState title="No decisions yet." />
      ) : (
        <Table
          id="history"
          caption="The latest decisions, newest first"
          rows={history}
          columns={[
            { label: 'Asked', cell: (a) => <a href={`/dashboard/approvals/${encodeURIComponent(a.id)}`} data-approval={a.id}>{askText(a)}</a> },
            { label: 'Status', cell: (a) => <StatusBadge status={a.status} /> },
            { label: 'By', cell: (a) => decidedByText(a, people) ?? '—' },
            { label: 'Reason', cell: (a) => a.decision_reason ?? '—' },
            { label: 'When', cell: (a) => <Time iso={a.decided_at ?? a.expires_at} now={now} /> },
          ]}
        />
      )}
      <PageLinks first={page.historyAfter ? queueUrl({ ...page, historyAfter: undefined }) : undefined} more={nextHistory ? queueUrl({ ...page, historyAfter: nextHistory }) : undefined} what="decisions" />
    </div>
  );
}

type DetailProps = { a: ApprovalRow; people: ReadonlyMap<string, string>; now: Date; csrf: string; mayDecide: boolean };

/** One approval: what is asked, the decision (or the form), and the execution's result. */
export function ApprovalDetail({ a, people, now, csrf, mayDecide }: DetailProps) {
  const amount = amountText(a.tool_input);
  const by = decidedByText(a, people);
  return (
    <div id="approval-live" hx-get={`/dashboard/approvals/${encodeURIComponent(a.id)}?fragment=1`} hx-trigger="approvals-changed from:body" hx-swap="outerHTML">
      <dl class="facts">
        <dt>Status</dt>
        <dd id="status">
          <StatusBadge status={a.status} />
        </dd>
        <dt>Asked</dt>
        <dd id="ask">{askText(a)}</dd>
        <dt>Agent</dt>
        <dd>
          <code id="agent">{a.agent_id}</code>
        </dd>
        <dt>Tool</dt>
        <dd>
          <code id="tool">{a.tool_name}</code>
        </dd>
        {amount ? (
          <>
            <dt>Amount</dt>
            <dd id="amount">{amount}</dd>
          </>
        ) : null}
        <dt>Held by policy</dt>
        <dd>{a.matched_rule_name}</dd>
        <dt>Requested</dt>
        <dd>
          <Time iso={a.created_at} now={now} />
        </dd>
        <dt>{a.status === 'pending' ? 'Expires' : 'Expired or expires'}</dt>
        <dd>
          <Time iso={a.expires_at} now={now} />
        </dd>
      </dl>
      <h2>Input, exactly as it will run</h2>
      <pre id="input" tabIndex={0}>{JSON.stringify(a.tool_input, null, 2)}</pre>
      {a.status === 'pending' ? (
        mayDecide ? (
          <form method="post" action={`/dashboard/approvals/${encodeURIComponent(a.id)}/decide`} id="decide">
            <Csrf token={csrf} />
            <div class="field">
              <label for="reason">Reason</label>
              <span class="hint" id="reason-hint">
                Kept with the decision in the audit chain.
              </span>
              <input id="reason" name="reason" type="text" maxLength={1000} aria-describedby="reason-hint" hx-preserve="true" />
            </div>
            <div class="actions">
              <Button id="approve" name="decision" value="approve">
                Approve and run it
              </Button>
              <Button id="deny" kind="danger" name="decision" value="deny">
                Deny
              </Button>
            </div>
          </form>
        ) : (
          <p id="cannot-decide">Deciding needs the admin role in this project; ask an admin or owner.</p>
        )
      ) : (
        <p id="decided">
          {a.status === 'expired'
            ? 'It expired before anyone decided.'
            : `${a.status === 'denied' ? 'Denied' : 'Approved'}${by ? ` by ${by}` : ''}${a.decided_at ? ` on ${a.decided_at.replace('T', ' ').slice(0, 16)} UTC` : ''}${a.decision_reason ? `: “${a.decision_reason}”` : '.'}`}
        </p>
      )}
      {a.execution_result ? (
        <>
          <h2>{a.status === 'execution_failed' ? 'The call failed when it ran' : 'What the call answered'}</h2>
          <pre id="result" tabIndex={0}>{JSON.stringify(a.execution_result, null, 2)}</pre>
        </>
      ) : null}
    </div>
  );
}
