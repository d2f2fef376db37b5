import type { FastifyRequest } from 'fastify';
import type { BankConsentRow } from '../usecases/bank-consents.ts';
import type { ChargeLine, MandateLine, Page, ReceivementLine } from '../usecases/consumer-money.ts';
import type { ConsumerView } from '../usecases/consumers.ts';
import type { WalletRow } from '../../projections/consumer.ts';
import { Badge, Button, type Column, Copyable, EmptyState, ErrorSummary, Field, type FieldError, PostForm, Table, Time } from './components.tsx';
import { BrowseList, CapBar, Facts, ListPages } from './browse.tsx';
import { Shell } from './layout.tsx';
import { MandateTable } from './mandates-view.tsx';
import { formatMinor } from './money.ts';

// A consumer's page: who it is, its wallet per currency (authorized, spent,
// available, a bar; the Pix balance), its mandates in this project, its bank
// consents, and its Pix: keys, charges (a form makes one) and what it received.

export type Wallet = { consumer_id: string; currencies: (WalletRow & { pix_balance_minor?: bigint; rail?: string })[] };
type Notice = { text: string; tone: 'ok' | 'error' } | null;

export function ConsumersPage({ req, consumers, next, now, notice }: { req: FastifyRequest; consumers: ConsumerView[]; next: string | null; now: Date; notice: Notice }) {
  const columns: Column<ConsumerView>[] = [
    { label: 'Consumer', cell: (c) => <a href={`/dashboard/consumers/${encodeURIComponent(c.id)}`}>{c.display_name ?? c.id}</a> },
    { label: 'Id', cell: (c) => <code>{c.id}</code> },
    { label: 'Identity', cell: (c) => (c.status === 'verified' ? <Badge tone="ok">Verified</Badge> : <Badge tone="neutral">Unverified</Badge>) },
    { label: 'Created', cell: (c) => <Time iso={c.created_at} now={now} /> },
  ];
  return (
    <Shell person={req.person!} title="Consumers" active="consumers" path="/dashboard/consumers" notice={notice}>
      <p>
        The people and companies your agents spend for. Each has a wallet per currency, the mandates that authorize the agents, bank consents and Pix. <a href="/dashboard/mandates">All mandates</a>
      </p>
      <BrowseList req={req} caption="Consumers, newest first" columns={columns} rows={consumers} id="consumers" empty="No consumers yet." cursor="before" next={next} label="consumers">
        <p>Create one with <code>POST /v1/consumers</code>.</p>
      </BrowseList>
    </Shell>
  );
}

type Props = {
  req: FastifyRequest;
  consumer: ConsumerView;
  wallet: Wallet;
  mandates: Page<MandateLine>;
  consents: BankConsentRow[];
  keys: { key: string; key_type: string; registered_at: string }[];
  charges: Page<ChargeLine>;
  receivements: Page<ReceivementLine>;
  now: Date;
  mayAct: boolean;
  notice: Notice;
  errors?: FieldError[];
  amount?: string;
};

export function ConsumerPage(p: Props) {
  const person = p.req.person!;
  const c = p.consumer;
  const self = `/dashboard/consumers/${encodeURIComponent(c.id)}`;
  return (
    <Shell person={person} title={`Consumer ${c.display_name ?? c.id}`} active="consumers" path={self} notice={p.notice} styles={['money.css']}>
      <p>
        <a href="/dashboard/consumers">All consumers</a>
      </p>
      <ErrorSummary errors={p.errors ?? []} />
      <Facts
        id="consumer-facts"
        items={[
          ['Id', <Copyable value={c.id} label="the consumer id" />],
          ['Identity', c.status === 'verified' ? <Badge tone="ok">Verified</Badge> : <Badge tone="neutral">Unverified</Badge>],
          ['Created', <Time iso={c.created_at} now={p.now} />],
        ]}
      />
      <section aria-labelledby="wallet-title">
        <h2 id="wallet-title">Wallet</h2>
        {p.wallet.currencies.length === 0 ? (
          <EmptyState title="Nothing authorized yet: no active mandate and no funding source in this project." />
        ) : (
          <div class="wallet" id="wallet">
            {p.wallet.currencies.map((w) => (
              <div class="panel" id={`wallet-${w.currency}`}>
                <h3>{w.currency}</h3>
                <CapBar id={`wallet-bar-${w.currency}`} label={`${w.currency} spent of what the mandates authorize`} used={String(w.spent_minor)} cap={String(w.authorized_minor)} currency={w.currency} />
                <p>
                  Available <strong>{formatMinor(String(w.available_minor), w.currency)}</strong>
                  {w.pix_balance_minor !== undefined ? (
                    <>
                      {' '}
                      · Pix balance <strong>{formatMinor(String(w.pix_balance_minor), w.currency)}</strong>
                    </>
                  ) : null}
                </p>
              </div>
            ))}
          </div>
        )}
      </section>
      <section aria-labelledby="mandates-title">
        <h2 id="mandates-title">Mandates</h2>
        {p.mandates.rows.length === 0 ? <EmptyState title="No mandates for this consumer in this project." /> : <MandateTable rows={p.mandates.rows} now={p.now} caption="Mandates, newest first" id="consumer-mandates" />}
        {p.mandates.next ? (
          <p>
            <a href={`/dashboard/mandates?consumer=${encodeURIComponent(c.id)}`}>All mandates of this consumer</a>
          </p>
        ) : null}
      </section>
      <Consents consents={p.consents} now={p.now} consumerId={c.id} />
      <PixSection {...p} self={self} />
    </Shell>
  );
}

function Consents({ consents, now, consumerId }: { consents: BankConsentRow[]; now: Date; consumerId: string }) {
  const columns: Column<BankConsentRow>[] = [
    { label: 'Consent', cell: (b) => <a href={`/dashboard/bank-consents/${encodeURIComponent(b.id)}`}>{b.id}</a> },
    { label: 'Bank', cell: (b) => b.bank_id },
    { label: 'Status', cell: (b) => <Badge tone={b.status === 'authorised' ? 'ok' : b.status === 'pending' ? 'warn' : 'neutral'}>{b.status}</Badge> },
    { label: 'Scopes', cell: (b) => b.scopes.join(', ') },
    { label: 'Created', cell: (b) => <Time iso={b.created_at} now={now} /> },
  ];
  return (
    <section aria-labelledby="consents-title">
      <h2 id="consents-title">Bank consents</h2>
      {consents.length === 0 ? <EmptyState title="No bank consents for this consumer in this project." /> : <Table caption="Bank consents, newest first" columns={columns} rows={consents} id="consents" />}
      {consents.length >= 20 ? (
        <p>
          The newest 20 are shown; each consent's page has its statement. (<code>GET /v1/bank-consents?consumer_id={consumerId}</code> lists them all.)
        </p>
      ) : null}
    </section>
  );
}

function PixSection(p: Props & { self: string }) {
  const chargeColumns: Column<ChargeLine>[] = [
    { label: 'Charge', cell: (c) => <a href={`${p.self}/charges/${encodeURIComponent(c.id)}`}>{c.id}</a> },
    { label: 'Amount', cell: (c) => formatMinor(c.amount_minor, c.currency), numeric: true },
    { label: 'Status', cell: (c) => <ChargeStatus status={c.status === 'pending' && Date.parse(c.expires_at) <= p.now.getTime() ? 'expired' : c.status} /> },
    { label: 'Kind', cell: (c) => c.kind },
    { label: 'Created', cell: (c) => <Time iso={c.created_at} now={p.now} /> },
  ];
  const receivedColumns: Column<ReceivementLine>[] = [
    { label: 'End-to-end id', cell: (r) => <code>{r.end_to_end_id}</code> },
    { label: 'Received', cell: (r) => formatMinor(r.received_minor, 'BRL'), numeric: true },
    { label: 'Credited', cell: (r) => (r.credited_minor === null ? '—' : formatMinor(r.credited_minor, 'BRL')), numeric: true },
    { label: 'Matched', cell: (r) => (r.charge_id ? <a href={`${p.self}/charges/${encodeURIComponent(r.charge_id)}`}>{r.charge_id}</a> : r.correlation.replaceAll('_', ' ')) },
    { label: 'When', cell: (r) => <Time iso={r.received_at} now={p.now} /> },
  ];
  return (
    <section aria-labelledby="pix-title">
      <h2 id="pix-title">Pix</h2>
      <h3>Keys</h3>
      {p.keys.length === 0 ? (
        <p id="no-pix-keys">No Pix key is registered (a charge needs one).</p>
      ) : (
        <ul id="pix-keys">
          {p.keys.map((k) => (
            <li>
              {k.key_type}: <code>{k.key}</code>
            </li>
          ))}
        </ul>
      )}
      <h3>Charges</h3>
      {p.charges.rows.length === 0 ? <EmptyState title="No charges yet." /> : <Table caption="Charges, newest first" columns={chargeColumns} rows={p.charges.rows} id="charges" />}
      <ListPages req={p.req} cursor="charges_before" next={p.charges.next} label="charges" />
      {p.mayAct ? (
        <div class="panel">
          <h3>Make a charge</h3>
          <PostForm action={`${p.self}/charges`} csrf={p.req.person!.csrfToken} id="charge-form">
            <Field id="charge-amount" name="amount" label="Amount in BRL" hint="For example 12.34. The payer gets a BR Code and its QR image." value={p.amount} error={p.errors?.find((e) => e.field === 'charge-amount')?.message} inputMode="text" maxLength={15} />
            <Button id="create-charge">Make the charge</Button>
          </PostForm>
        </div>
      ) : null}
      <h3>Received</h3>
      {p.receivements.rows.length === 0 ? <EmptyState title="Nothing received yet." /> : <Table caption="Pix received, newest first" columns={receivedColumns} rows={p.receivements.rows} id="receivements" />}
      <ListPages req={p.req} cursor="received_before" next={p.receivements.next} label="received Pix" />
    </section>
  );
}

export const ChargeStatus = ({ status }: { status: string }) => <Badge tone={status === 'settled' || status === 'paid' ? 'ok' : status === 'pending' ? 'warn' : 'neutral'}>{status}</Badge>;
