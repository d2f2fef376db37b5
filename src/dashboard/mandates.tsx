import type { FastifyInstance, FastifyRequest, preHandlerHookHandler } from 'fastify';
import { Rejection } from '../eventstore/handler.ts';
import { browseMandates, mandateDecisions } from '../usecases/consumer-money.ts';
import { bindMandateCard, moveMandate, type MandateRow, readMandateCard, readMandate, revokeMandateCard } from '../usecases/mandates.ts';
import { action, adminHere, confirmed, ListPages, notFoundIn, queryOf } from './browse.tsx';
import { EmptyState } from './components.tsx';
import { type DashboardDeps, formField, personRun, takeFlash } from './context.ts';
import { Shell, sendPage } from './layout.tsx';
import { MandateTable, MandateView } from './mandates-view.tsx';
import type { Person } from './session.ts';

// Mandates of the current project: the list (of a consumer or an agent, when
// named), one mandate's page, and its actions: pause / resume / revoke (the
// use case of POST /v1/mandates/:id/{pause,resume,revoke}) and the card
// (bind a sandbox card, revoke it: the use cases of /v1/consumers/mandates/:id/card),
// by an admin or owner in the project, recorded with the person as actor.

const ID = /^mdt_[A-Za-z0-9]{1,64}$/;
const PAGE = 50;
const tenantOf = (p: Person) => ({ orgId: p.orgId, projectId: p.projectId });

async function findMandate(deps: DashboardDeps, person: Person, id: string): Promise<MandateRow | undefined> {
  if (!ID.test(id)) return undefined;
  try {
    return await readMandate(deps, tenantOf(person), id);
  } catch (err) {
    if (err instanceof Rejection) return undefined;
    throw err;
  }
}

const MOVES = { pause: 'paused', resume: 'active', revoke: 'revoked' } as const;
const MOVED = { paused: 'The mandate is paused: every spend is refused until it is resumed.', active: 'The mandate is resumed: spends within its caps are allowed again.', revoked: 'The mandate is revoked: it allows no more spends.' } as const;
const MANDATE_REFUSALS: Record<string, string> = {
  mandate_not_found: 'That mandate no longer exists in this project: reload the page.',
  transition_conflict: 'Someone changed this mandate at the same moment: reload the page and try again.',
  invalid_transition: 'The mandate cannot move that way from where it is now (a revoked or expired mandate stays so).',
  mandate_already_revoked: 'The mandate is already revoked.',
  mandate_already_expired: 'The mandate has expired.',
  not_wired: 'Live cards need a card issuer, and none is configured.',
};

export async function mandateRoutes(app: FastifyInstance, deps: DashboardDeps, signedIn: preHandlerHookHandler): Promise<void> {
  app.get('/dashboard/mandates', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const consumer = queryOf(req, 'consumer');
    const agent = queryOf(req, 'agent');
    const page = await browseMandates(deps, tenantOf(person), { consumer_id: consumer, agent_id: agent, before: queryOf(req, 'before'), limit: PAGE });
    const of = consumer ? ` of consumer ${consumer}` : agent ? ` of agent ${agent}` : '';
    return sendPage(
      reply,
      <Shell person={person} title="Mandates" active="consumers" path="/dashboard/mandates" notice={takeFlash(req, reply)}>
        <p>
          What each agent may spend for a consumer in this project. <a href="/dashboard/consumers">Consumers</a>
        </p>
        {page.rows.length === 0 ? <EmptyState title={`No mandates${of}.`} /> : <MandateTable rows={page.rows} now={deps.now()} caption={`Mandates${of}, newest first`} id="mandates" />}
        <ListPages req={req} cursor="before" next={page.next} label="mandates" />
      </Shell>,
    );
  });

  app.get('/dashboard/mandates/:id', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const m = await findMandate(deps, person, (req.params as { id: string }).id);
    if (!m) return notFoundIn(reply, person, 'consumers', 'mandate', { href: '/dashboard/mandates', label: 'the mandates' });
    const [card, decisions] = await Promise.all([readMandateCard(deps, tenantOf(person), m.id, 1), mandateDecisions(deps, m.id, { before: queryOf(req, 'before'), limit: PAGE })]);
    return sendPage(reply, <MandateView req={req} m={m} card={card.card} decisions={decisions} now={deps.now()} mayAct={await adminHere(deps, person)} notice={takeFlash(req, reply)} />);
  });

  const back = (req: FastifyRequest) => `/dashboard/mandates/${encodeURIComponent((req.params as { id: string }).id)}`;
  const refusal = (r: Rejection) => MANDATE_REFUSALS[r.code];
  const ctx = (req: FastifyRequest, person: Person) => ({ ports: deps, run: personRun(deps, req, person), tenant: tenantOf(person) });
  const idOf = (req: FastifyRequest) => {
    const id = (req.params as { id: string }).id;
    if (!ID.test(id)) throw new Rejection('mandate_not_found', 'mandate not found');
    return id;
  };
  action(app, deps, signedIn, '/dashboard/mandates/:id/move', {
    active: 'consumers',
    back,
    refusal,
    act: async (req, person) => {
      const verb = formField(req.body, 'to');
      if (!Object.hasOwn(MOVES, verb)) throw new Rejection('invalid_transition', 'choose pause, resume or revoke');
      const to = MOVES[verb as keyof typeof MOVES];
      if (to === 'revoked') confirmed(req.body, 'To revoke: revoking cannot be undone');
      const reason = formField(req.body, 'reason').trim().slice(0, 500) || null;
      const r = await moveMandate(ctx(req, person), idOf(req), to, reason);
      return r.changed ? MOVED[to] : `Nothing changed: the mandate was already ${to === 'active' ? 'active' : to}.`;
    },
  });
  action(app, deps, signedIn, '/dashboard/mandates/:id/card', {
    active: 'consumers',
    back,
    refusal,
    act: async (req, person) => {
      const r = await bindMandateCard(ctx(req, person), person.environment, idOf(req));
      return r.changed ? `The sandbox card ${r.card.card_id} is bound: its authorizations are spends against this mandate.` : 'A card was already bound.';
    },
  });
  action(app, deps, signedIn, '/dashboard/mandates/:id/card/revoke', {
    active: 'consumers',
    back,
    refusal,
    act: async (req, person) => {
      const r = await revokeMandateCard(ctx(req, person), idOf(req));
      return `The card ${r.card_id} is revoked: its authorizations are refused.`;
    },
  });
}
