import type { FastifyInstance, FastifyRequest, preHandlerHookHandler } from 'fastify';
import { Rejection } from '../eventstore/handler.ts';
import { type ChargeRow, chargeStatusOf, readCharges, simulatePixPayment } from '../usecases/pix-charges.ts';
import { qrPngDataUri } from '../usecases/pix-qr.ts';
import { action, adminHere, Facts, notFoundIn } from './browse.tsx';
import { Button, Copyable, PostForm, Time } from './components.tsx';
import { type DashboardDeps, takeFlash } from './context.ts';
import { ChargeStatus } from './consumers-view.tsx';
import { Shell, sendPage } from './layout.tsx';
import { formatMinor } from './money.ts';
import type { Person } from './session.ts';

// One Pix charge: its amount and status, its BR Code ("Pix Copia e Cola")
// with a copy button and its QR image, and, in test data, "Pay it from the
// sandbox": the sandbox PSP's simulated payer pays it (the use case of
// POST /v1/test/pix/payments), and the PSP's notification settles it.

const CONSUMER = /^cns_[A-Za-z0-9]{1,64}$/;
const CHARGE = /^pxc_[A-Za-z0-9]{1,64}$/;
const tenantOf = (p: Person) => ({ orgId: p.orgId, projectId: p.projectId });

async function findCharge(deps: DashboardDeps, person: Person, consumerId: string, chargeId: string): Promise<ChargeRow | undefined> {
  if (!CONSUMER.test(consumerId) || !CHARGE.test(chargeId)) return undefined;
  return (await readCharges(deps, tenantOf(person), consumerId, chargeId)).find((c) => c.charge_id === chargeId);
}

type Params = { id: string; charge: string };

export async function pixRoutes(app: FastifyInstance, deps: DashboardDeps, signedIn: preHandlerHookHandler): Promise<void> {
  app.get('/dashboard/consumers/:id/charges/:charge', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const p = req.params as Params;
    const c = await findCharge(deps, person, p.id, p.charge);
    if (!c) return notFoundIn(reply, person, 'consumers', 'charge', { href: `/dashboard/consumers/${encodeURIComponent(p.id)}`, label: 'the consumer' });
    const now = deps.now();
    const status = chargeStatusOf(c, now);
    const self = `/dashboard/consumers/${encodeURIComponent(c.consumer_id)}/charges/${encodeURIComponent(c.charge_id)}`;
    const payable = status === 'pending' && c.psp === 'sandbox' && person.environment === 'test' && (await adminHere(deps, person));
    return sendPage(
      reply,
      <Shell person={person} title={`Charge of ${formatMinor(c.amount_minor, c.currency)}`} active="consumers" path={self} notice={takeFlash(req, reply)} styles={['money.css']}>
        <p>
          <a href={`/dashboard/consumers/${encodeURIComponent(c.consumer_id)}`}>The consumer</a>
        </p>
        <Facts
          id="charge-facts"
          items={[
            ['Charge', <Copyable value={c.charge_id} label="the charge id" />],
            ['Amount', formatMinor(c.amount_minor, c.currency)],
            ['Status', <span id="charge-status"><ChargeStatus status={status} /></span>],
            ['Kind', c.kind === 'dynamic' ? 'Dynamic (a charge at the PSP)' : 'Static (our BR Code)'],
            ['Reference (txid)', <code>{c.txid}</code>],
            ['Expires', <Time iso={c.expires_at} now={now} />],
            ...(c.settled_at ? ([['Settled', <Time iso={c.settled_at} now={now} />]] as [string, preact.ComponentChildren][]) : []),
            ...(c.end_to_end_id ? ([['End-to-end id', <code>{c.end_to_end_id}</code>]] as [string, preact.ComponentChildren][]) : []),
          ]}
        />
        {c.br_code ? (
          <section aria-labelledby="pay-title" class="panel">
            <h2 id="pay-title">How the payer pays</h2>
            <p>Scan the QR image with a bank's app, or paste the code into its “Pix Copia e Cola”.</p>
            <img class="qr" id="charge-qr" src={await qrPngDataUri(c.br_code)} alt={`QR image of the Pix charge of ${formatMinor(c.amount_minor, c.currency)}`} width={240} height={240} />
            <Copyable value={c.br_code} id="br-code" label="the BR Code" />
          </section>
        ) : (
          <p>This charge was recorded without a BR Code.</p>
        )}
        {payable ? (
          <PostForm action={`${self}/pay`} csrf={person.csrfToken} id="pay-form">
            <p>Test data: the sandbox's simulated payer can pay this charge, as a real payer's bank would.</p>
            <Button id="pay-sandbox">Pay it from the sandbox</Button>
          </PostForm>
        ) : null}
      </Shell>,
    );
  });

  action(app, deps, signedIn, '/dashboard/consumers/:id/charges/:charge/pay', {
    active: 'consumers',
    back: (req: FastifyRequest) => {
      const p = req.params as Params;
      return `/dashboard/consumers/${encodeURIComponent(p.id)}/charges/${encodeURIComponent(p.charge)}`;
    },
    refusal: (r) => (r.code === 'payment_refused' ? 'The sandbox refused the payment (the charge may have expired or been paid already).' : undefined),
    act: async (req, person) => {
      const p = req.params as Params;
      if (person.environment !== 'test') throw new Rejection('sandbox_funding_not_permitted', 'switch to test data: only test charges are paid from the sandbox');
      const c = await findCharge(deps, person, p.id, p.charge);
      if (!c) throw new Rejection('not_found', 'that charge no longer exists');
      const r = await simulatePixPayment(deps, tenantOf(person), { consumer_id: c.consumer_id, charge_reference: c.charge_id });
      return `Paid from the sandbox (end-to-end id ${r.end_to_end_id}): the charge settles when the PSP's notification arrives; reload to see it.`;
    },
  });
}
