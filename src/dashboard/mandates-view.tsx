import type { ComponentChildren } from 'preact';
import type { FastifyRequest } from 'fastify';
import type { CardRow, MandateRow } from '../usecases/mandates.ts';
import type { MandateDecision, MandateLine, Page } from '../usecases/consumer-money.ts';
import { Badge, Button, type Column, Copyable, EmptyState, Field, PostForm, Table, Time } from './components.tsx';
import { CapBar, ConfirmBox, Facts, ListPages } from './browse.tsx';
import { Shell } from './layout.tsx';
import { formatMinor } from './money.ts';

// A mandate's page: what it authorizes, each currency's cap used and left (a
// bar), pause / resume / revoke, its card and the card's authorizations, and
// every spend decision with, for a refusal, the rule and the numbers.

const STATUS_TONE = { active: 'ok', paused: 'warn', revoked: 'danger', expired: 'neutral' } as const;
export const StatusBadge = ({ status }: { status: string }) => <Badge tone={STATUS_TONE[status as keyof typeof STATUS_TONE] ?? 'neutral'}>{status[0]!.toUpperCase() + status.slice(1)}</Badge>;

/** A decline code in a few words (the list's short form). */
export function declineWords(code: string): string {
  return DECLINE_WORDS[code] ?? code.replaceAll('_', ' ');
}
const DECLINE_WORDS: Record<string, string> = {
  per_tx_cap_exceeded: 'Over the per-spend cap',
  total_cap_exceeded: 'Over the total cap',
  merchant_not_allowed: 'Merchant not on the list',
  currency_not_authorized: 'Currency not authorized',
  mandate_not_active: 'Mandate not active (paused)',
  mandate_already_revoked: 'Mandate revoked',
  mandate_already_expired: 'Mandate expired',
};

/** Why a spend was declined: the rule it broke and the numbers it broke it with. */
export function declineReason(m: MandateRow, d: MandateDecision): string {
  const slot = m.slots?.find((s) => s.currency === d.currency);
  const amount = formatMinor(d.amount_minor, d.currency);
  switch (d.code) {
    case 'per_tx_cap_exceeded':
      return `Asked ${amount}; this mandate allows at most ${formatMinor(slot?.per_tx_cap_minor ?? m.per_tx_cap_minor, d.currency)} in one spend.`;
    case 'total_cap_exceeded': {
      const cap = slot?.authorized_minor ?? m.cap_minor;
      const spent = d.spent_before_minor ?? '0';
      const left = BigInt(cap) - BigInt(spent);
      return `Asked ${amount}; ${formatMinor(spent, d.currency)} of the ${formatMinor(cap, d.currency)} cap was already spent, so ${formatMinor((left < 0n ? 0n : left).toString(), d.currency)} was left.`;
    }
    case 'merchant_not_allowed':
      return `${d.merchant} is not on the mandate's merchant list (${m.merchant_allowlist.join(', ') || 'empty'}).`;
    case 'currency_not_authorized':
      return `The mandate authorizes ${(m.slots ?? []).map((s) => s.currency).join(', ') || m.currency}, not ${d.currency}.`;
    case 'mandate_not_active':
      return 'The mandate was paused when the spend came: resume it to allow spends.';
    case 'mandate_already_revoked':
      return 'The mandate was revoked: it allows no more spends.';
    case 'mandate_already_expired':
      return `The mandate expired at ${m.expires_at.replace('T', ' ').slice(0, 16)} UTC.`;
    default:
      return declineWords(d.code ?? '');
  }
}

type Props = { req: FastifyRequest; m: MandateRow; card: CardRow | null; decisions: Page<MandateDecision>; now: Date; mayAct: boolean; notice: { text: string; tone: 'ok' | 'error' } | null };

export function MandateView({ req, m, card, decisions, now, mayAct, notice }: Props) {
  const person = req.person!;
  const self = `/dashboard/mandates/${encodeURIComponent(m.id)}`;
  const slots = m.slots && m.slots.length > 0 ? m.slots : [{ currency: m.currency, cap_minor: m.cap_minor, per_tx_cap_minor: m.per_tx_cap_minor, authorized_minor: m.cap_minor, spent_minor: '0', available_minor: m.cap_minor, rail: null, funding_source_id: null }];
  const columns: Column<MandateDecision>[] = [
    { label: 'When', cell: (d) => <Time iso={d.at} now={now} /> },
    { label: 'Amount', cell: (d) => formatMinor(d.amount_minor, d.currency), numeric: true },
    { label: 'Merchant', cell: (d) => d.merchant },
    { label: 'Channel', cell: (d) => (d.channel === 'card' ? 'Card' : 'API') },
    { label: 'Decision', cell: (d) => (d.decision === 'approved' ? <Badge tone="ok">Approved</Badge> : <Badge tone="danger">Declined</Badge>) },
    { label: 'Why', cell: (d) => (d.decision === 'approved' ? '—' : <span class="why">{declineReason(m, d)}</span>) },
  ];
  return (
    <Shell person={person} title={`Mandate ${m.display_name ?? m.purpose}`} active="consumers" path={self} notice={notice} styles={['money.css']}>
      <p>
        <a href={`/dashboard/consumers/${encodeURIComponent(m.consumer_id)}`}>The consumer</a> · <a href={`/dashboard/agents/${encodeURIComponent(m.agent_id)}`}>The agent</a>
      </p>
      <Facts
        id="mandate-facts"
        items={[
          ['Id', <Copyable value={m.id} label="the mandate id" />],
          ['Status', <StatusBadge status={m.status} />],
          ['Purpose', m.purpose],
          ['Agent', <code>{m.agent_id}</code>],
          ['Merchants', `${m.merchant_allowlist.join(', ') || 'none'} (${m.merchant_pin_kind})`],
          ['Expires', <Time iso={m.expires_at} now={now} />],
          ['Granted', <Time iso={m.created_at} now={now} />],
        ]}
      />
      <section aria-labelledby="caps-title">
        <h2 id="caps-title">Caps</h2>
        {slots.map((s, i) => (
          <div class="panel" id={`slot-${s.currency}`}>
            <CapBar id={`cap-${i}`} label={`${s.currency}: spent of the cap`} used={s.spent_minor} cap={s.authorized_minor} currency={s.currency} />
            <p class="hint">At most {formatMinor(s.per_tx_cap_minor, s.currency)} in one spend.{s.rail ? ` Paid over ${s.rail}.` : ''}</p>
          </div>
        ))}
      </section>
      {mayAct ? <Moves m={m} self={self} csrf={person.csrfToken} /> : <p id="mandate-read-only">Admins and owners pause, resume and revoke mandates.</p>}
      <CardSection card={card} self={self} csrf={person.csrfToken} mayAct={mayAct && m.status === 'active'} now={now} test={person.environment === 'test'} />
      <section aria-labelledby="decisions-title">
        <h2 id="decisions-title">Spends and card authorizations</h2>
        {decisions.rows.length === 0 ? <EmptyState title="No spends yet." /> : <Table caption="Every spend decision, newest first" columns={columns} rows={decisions.rows} id="decisions" />}
        <ListPages req={req} cursor="before" next={decisions.next} label="spend decisions" />
      </section>
    </Shell>
  );
}

function Moves({ m, self, csrf }: { m: MandateRow; self: string; csrf: string }) {
  if (m.status === 'revoked' || m.status === 'expired') return <p id="mandate-final">This mandate is {m.status}: nothing more can change it.</p>;
  const verb = m.status === 'paused' ? 'resume' : 'pause';
  return (
    <div class="panel" id="moves">
      <h2>Pause, resume or revoke</h2>
      <p>{m.status === 'paused' ? 'Paused: every spend is refused until it is resumed.' : 'Active: spends within the caps are allowed.'}</p>
      <PostForm action={`${self}/move`} csrf={csrf} id="move-form">
        <Field id="move-reason" name="reason" label="Reason (optional)" hint="Recorded with the change, in the audit chain." maxLength={500} />
        <ConfirmBox id="confirm-revoke" label="To revoke: revoking cannot be undone" />
        <div class="actions">
          <Button name="to" value={verb} id={`${verb}-mandate`}>
            {verb === 'pause' ? 'Pause the mandate' : 'Resume the mandate'}
          </Button>
          <Button kind="danger" name="to" value="revoke" id="revoke-mandate">
            Revoke the mandate
          </Button>
        </div>
      </PostForm>
    </div>
  );
}

function CardSection({ card, self, csrf, mayAct, now, test }: { card: CardRow | null; self: string; csrf: string; mayAct: boolean; now: Date; test: boolean }) {
  let body: ComponentChildren;
  if (card) {
    body = (
      <>
        <Facts id="card" items={[['Card', <code>{card.card_id}</code>], ['Status', <Badge tone="ok">Active</Badge>], ['Bound', <Time iso={card.bound_at} now={now} />]]} />
        {mayAct ? (
          <PostForm action={`${self}/card/revoke`} csrf={csrf} inline>
            <Button kind="danger" small id="revoke-card">
              Revoke the card
            </Button>
          </PostForm>
        ) : null}
      </>
    );
  } else {
    body = (
      <>
        <p id="no-card">No card is bound to this mandate. A card's authorizations are spends against it.</p>
        {mayAct && test ? (
          <PostForm action={`${self}/card`} csrf={csrf} inline>
            <Button kind="secondary" small id="bind-card">
              Bind a sandbox card
            </Button>
          </PostForm>
        ) : null}
      </>
    );
  }
  return (
    <section aria-labelledby="card-title">
      <h2 id="card-title">Card</h2>
      {body}
    </section>
  );
}

/** The project's mandates as a table, each with its cap used (a list: the bar is on the mandate's page). */
export function MandateTable({ rows, now, caption, id }: { rows: MandateLine[]; now: Date; caption: string; id: string }) {
  const columns: Column<MandateLine>[] = [
    { label: 'Mandate', cell: (m) => <a href={`/dashboard/mandates/${encodeURIComponent(m.id)}`}>{m.display_name ?? m.purpose}</a> },
    { label: 'Status', cell: (m) => <StatusBadge status={m.status} /> },
    { label: 'Agent', cell: (m) => <code>{m.agent_id}</code> },
    { label: 'Used of cap', cell: (m) => `${formatMinor(m.spent_minor, m.currency)} of ${formatMinor(m.cap_minor, m.currency)}`, numeric: true },
    { label: 'Expires', cell: (m) => <Time iso={m.expires_at} now={now} /> },
  ];
  return <Table caption={caption} columns={columns} rows={rows} id={id} />;
}
