import type { FastifyInstance, FastifyRequest, preHandlerHookHandler } from 'fastify';
import { Rejection } from '../eventstore/handler.ts';
import { type BankConsentRow, getBankConsent, refreshBankStatement, revokeBankConsent } from '../usecases/bank-consents.ts';
import { consentStatement, type StatementLine } from '../usecases/consumer-money.ts';
import { action, adminHere, Facts, ListPages, notFoundIn, queryOf } from './browse.tsx';
import { Badge, Button, type Column, EmptyState, PostForm, Table, Time } from './components.tsx';
import { type DashboardDeps, personRun, takeFlash } from './context.ts';
import { Shell, sendPage } from './layout.tsx';
import { formatMinor } from './money.ts';
import type { Person } from './session.ts';

// One bank consent: its bank, status, scopes and times, its statement (the
// lines imported through it, a page at a time), and the actions of
// /v1/bank-consents/:id/{refresh-statement,revoke}, by an admin or owner.

const ID = /^ofb_[A-Za-z0-9]{1,64}$/;
const PAGE = 50;
const tenantOf = (p: Person) => ({ orgId: p.orgId, projectId: p.projectId });

async function findConsent(deps: DashboardDeps, person: Person, id: string): Promise<BankConsentRow | undefined> {
  if (!ID.test(id)) return undefined;
  try {
    return await getBankConsent(deps, tenantOf(person), id);
  } catch (err) {
    if (err instanceof Rejection) return undefined;
    throw err;
  }
}

const REFUSALS: Record<string, string> = {
  consent_not_authorised: 'The consent is not authorised (any more): there is no statement to fetch.',
  bank_unavailable: 'The bank did not answer: the pages fetched before are kept; try again later.',
  bank_refused: 'The bank refused the request.',
  invalid_transition: 'The consent is already closed.',
};

export async function bankRoutes(app: FastifyInstance, deps: DashboardDeps, signedIn: preHandlerHookHandler): Promise<void> {
  app.get('/dashboard/bank-consents/:id', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const c = await findConsent(deps, person, (req.params as { id: string }).id);
    if (!c) return notFoundIn(reply, person, 'consumers', 'bank consent', { href: '/dashboard/consumers', label: 'the consumers' });
    const now = deps.now();
    const lines = await consentStatement(deps, c.id, { before: queryOf(req, 'before'), limit: PAGE });
    const self = `/dashboard/bank-consents/${encodeURIComponent(c.id)}`;
    const mayAct = (await adminHere(deps, person)) && c.status === 'authorised';
    const columns: Column<StatementLine>[] = [
      { label: 'Booked', cell: (l) => <Time iso={l.booked_at} now={now} /> },
      { label: 'Description', cell: (l) => l.description },
      { label: 'Amount', cell: (l) => `${l.credit_debit === 'DEBIT' ? '−' : '+'}${formatMinor(l.amount_minor, l.currency)}`, numeric: true },
      { label: 'Bank transaction', cell: (l) => <code>{l.bank_transaction_id}</code> },
    ];
    return sendPage(
      reply,
      <Shell person={person} title={`Bank consent at ${c.bank_id}`} active="consumers" path={self} notice={takeFlash(req, reply)} styles={['money.css']}>
        <p>
          <a href={`/dashboard/consumers/${encodeURIComponent(c.consumer_id)}`}>The consumer</a>
        </p>
        <Facts
          id="consent-facts"
          items={[
            ['Consent', <code>{c.id}</code>],
            ['Bank', c.bank_id],
            ['Status', <Badge tone={c.status === 'authorised' ? 'ok' : c.status === 'pending' ? 'warn' : 'neutral'}>{c.status}</Badge>],
            ['Scopes', c.scopes.join(', ')],
            ['Authorised', <Time iso={c.authorized_at} now={now} />],
            ['Expires', <Time iso={c.expires_at} now={now} />],
          ]}
        />
        {mayAct ? (
          <div class="actions">
            <PostForm action={`${self}/refresh`} csrf={person.csrfToken} inline>
              <Button kind="secondary" id="refresh-statement">
                Fetch the statement from the bank
              </Button>
            </PostForm>
            <PostForm action={`${self}/revoke`} csrf={person.csrfToken} inline>
              <Button kind="danger" id="revoke-consent">
                Revoke the consent
              </Button>
            </PostForm>
          </div>
        ) : null}
        <section aria-labelledby="statement-title">
          <h2 id="statement-title">Statement</h2>
          {lines.rows.length === 0 ? <EmptyState title="No statement lines imported yet." /> : <Table caption="Statement lines, newest first" columns={columns} rows={lines.rows} id="statement" />}
          <ListPages req={req} cursor="before" next={lines.next} label="statement lines" />
        </section>
      </Shell>,
    );
  });

  const back = (req: FastifyRequest) => `/dashboard/bank-consents/${encodeURIComponent((req.params as { id: string }).id)}`;
  const refusal = (r: Rejection) => REFUSALS[r.code];
  const owned = async (req: FastifyRequest, person: Person) => {
    const c = await findConsent(deps, person, (req.params as { id: string }).id);
    if (!c) throw new Rejection('not_found', 'bank consent not found');
    return c;
  };
  action(app, deps, signedIn, '/dashboard/bank-consents/:id/refresh', {
    active: 'consumers',
    back,
    refusal,
    act: async (req, person) => {
      const c = await owned(req, person);
      const r = await refreshBankStatement(deps, personRun(deps, req, person), tenantOf(person), c.id, {});
      return `The statement is fetched: ${r.imported} new ${r.imported === 1 ? 'line' : 'lines'}, ${r.duplicates} already known.`;
    },
  });
  action(app, deps, signedIn, '/dashboard/bank-consents/:id/revoke', {
    active: 'consumers',
    back,
    refusal,
    act: async (req, person) => {
      const c = await owned(req, person);
      await revokeBankConsent(deps, personRun(deps, req, person), tenantOf(person), c.id);
      return 'The consent is revoked: the bank deletes its side, and no more statements are fetched.';
    },
  });
}

