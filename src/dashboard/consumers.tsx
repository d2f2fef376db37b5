import type { FastifyInstance, FastifyReply, FastifyRequest, preHandlerHookHandler } from 'fastify';
import { Rejection } from '../eventstore/handler.ts';
import { listBankConsents } from '../usecases/bank-consents.ts';
import { browseConsumers, browseMandates, cachedPixKeys, consumerCharges, consumerReceivements } from '../usecases/consumer-money.ts';
import { consumerWallet, readConsumer } from '../usecases/consumers.ts';
import { createPixCharge } from '../usecases/pix-charges.ts';
import { adminHere, notFoundIn, queryOf } from './browse.tsx';
import type { FieldError } from './components.tsx';
import { csrfOk, type DashboardDeps, flash, formField, personRun, rejectionText, takeFlash } from './context.ts';
import { ConsumerPage, ConsumersPage } from './consumers-view.tsx';
import { sendPage } from './layout.tsx';
import { refusedPage, roleRefusedPage } from './refused.tsx';
import type { Person } from './session.ts';

// Consumers and their money: the organization's consumers (a page at a
// time), one consumer's wallet, mandates, bank consents and Pix (keys,
// charges, what it received), and a charge made from the page (the use case
// of POST /v1/consumers/:id/pix/charges, by an admin or owner in the project).

const ID = /^cns_[A-Za-z0-9]{1,64}$/;
const PAGE = 50;
const SUB = 20;
const tenantOf = (p: Person) => ({ orgId: p.orgId, projectId: p.projectId });
/** "12.34" or "12" BRL → minor units; null when it is not an amount. */
const AMOUNT = /^(\d{1,10})(?:[.,](\d{1,2}))?$/;
export function minorOfBrl(text: string): number | null {
  const m = AMOUNT.exec(text.trim());
  if (!m) return null;
  const minor = Number(m[1]) * 100 + Number((m[2] ?? '0').padEnd(2, '0'));
  return minor > 0 ? minor : null;
}

const CHARGE_REFUSALS: Record<string, string> = {
  no_partner_account: 'This consumer has no Pix account at a PSP yet: open one first (POST /v1/consumers/{id}/pix/partner-account).',
  pix_key_required: 'A charge needs a Pix key on the account: register one first.',
  wallet_not_active: 'The consumer has no active Pix wallet.',
  provider_error: 'The PSP did not create the charge: try again in a moment.',
  not_wired: 'No PSP is configured for this environment.',
};

export async function consumerRoutes(app: FastifyInstance, deps: DashboardDeps, signedIn: preHandlerHookHandler): Promise<void> {
  app.get('/dashboard/consumers', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const page = await browseConsumers(deps, person.orgId, { before: queryOf(req, 'before'), limit: PAGE });
    return sendPage(reply, <ConsumersPage req={req} consumers={page.rows} next={page.next} now={deps.now()} notice={takeFlash(req, reply)} />);
  });

  const render = async (req: FastifyRequest, reply: FastifyReply, opts: { status?: number; errors?: FieldError[]; amount?: string } = {}) => {
    const person = req.person!;
    const id = (req.params as { id: string }).id;
    const consumer = ID.test(id) ? await readConsumer(deps, person, id) : undefined;
    if (!consumer) return notFoundIn(reply, person, 'consumers', 'consumer', { href: '/dashboard/consumers', label: 'the consumers' });
    const t = tenantOf(person);
    const [wallet, mandates, consents, keys, charges, receivements, mayAct] = await Promise.all([
      consumerWallet(deps, t, consumer.id),
      browseMandates(deps, t, { consumer_id: consumer.id, limit: SUB }),
      listBankConsents(deps, t, { consumer_id: consumer.id, limit: SUB }),
      cachedPixKeys(deps, consumer.id),
      consumerCharges(deps, t, consumer.id, { before: queryOf(req, 'charges_before'), limit: SUB }),
      consumerReceivements(deps, t, consumer.id, { before: queryOf(req, 'received_before'), limit: SUB }),
      adminHere(deps, person),
    ]);
    const notice = opts.errors ? { text: 'The charge was not made.', tone: 'error' as const } : takeFlash(req, reply);
    return sendPage(
      reply,
      <ConsumerPage req={req} consumer={consumer} wallet={wallet} mandates={mandates} consents={consents} keys={keys} charges={charges} receivements={receivements} now={deps.now()} mayAct={mayAct} notice={notice} {...(opts.errors ? { errors: opts.errors } : {})} {...(opts.amount !== undefined ? { amount: opts.amount } : {})} />,
      opts.status ?? 200,
    );
  };
  app.get('/dashboard/consumers/:id', { preHandler: signedIn }, async (req, reply) => render(req, reply));

  app.post('/dashboard/consumers/:id/charges', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    if (!csrfOk(req, deps.baseUrl, person)) return refusedPage(reply);
    if (!(await adminHere(deps, person))) return roleRefusedPage(reply, person, 'admin', 'consumers');
    const id = (req.params as { id: string }).id;
    const amountText = formField(req.body, 'amount').slice(0, 20);
    const minor = minorOfBrl(amountText);
    if (minor === null) return render(req, reply, { status: 400, errors: [{ field: 'charge-amount', message: 'Enter an amount in BRL greater than zero, like 12.34' }], amount: amountText });
    if (!ID.test(id) || !(await readConsumer(deps, person, id))) return render(req, reply);
    try {
      const c = await createPixCharge(deps, personRun(deps, req, person), tenantOf(person), id, { amount_minor: minor });
      flash(reply, `The charge ${c.charge_id} is made: show its BR Code or QR image to the payer.`);
      return reply.redirect(`/dashboard/consumers/${encodeURIComponent(id)}/charges/${encodeURIComponent(c.charge_id)}`, 303);
    } catch (err) {
      if (!(err instanceof Rejection)) throw err;
      return render(req, reply, { status: 409, errors: [{ field: 'charge-amount', message: CHARGE_REFUSALS[err.code] ?? rejectionText(err) }], amount: amountText });
    }
  });
}
