import type { FastifyInstance, FastifyReply, FastifyRequest, preHandlerHookHandler } from 'fastify';
import { Rejection } from '../eventstore/handler.ts';
import { Pattern } from '../policy/config.ts';
import { createPolicy, getPolicy, listPolicies, type PolicyRow, updatePolicy } from '../usecases/policies.ts';
import { decisionCounts, listDecisions, OUTCOMES, type Outcome } from '../usecases/policy-decisions.ts';
import { Button, ErrorSummary, Field, type FieldError, PostForm, Select } from './components.tsx';
import { csrfOk, type DashboardDeps, flash, formField, personRun, rejectionText, takeFlash } from './context.ts';
import { Shell, sendPage } from './layout.tsx';
import { adminOf, notFoundIn } from './browse.tsx';
import { DecisionFilter, DecisionTable, EnableForm, PolicySettings, PolicyTable } from './policies-view.tsx';
import { refusedPage, roleRefusedPage } from './refused.tsx';
import type { Person } from './session.ts';

// Policies: the organization's policies in evaluation order with the
// decisions each made (allowed, held, denied), one policy's page with its
// settings and decisions, enabling or disabling a policy and adding a simple
// one: the same use cases as /v1/policies, by an admin or owner (policies
// govern every project of the organization), the person recorded as actor.

const PAGE = 50;
const ID = /^pol_[A-Za-z0-9]{16}$/;
type Q = { decision?: string; cursor?: string };
const query = (req: FastifyRequest) => (req.query ?? {}) as Q;
const outcomeOf = (v: string | undefined): Outcome | undefined => (OUTCOMES as readonly string[]).includes(v ?? '') ? (v as Outcome) : undefined;
const ctx = (deps: DashboardDeps, req: FastifyRequest, person: Person) => ({ ports: deps, run: personRun(deps, req, person), orgId: person.orgId });
const NEW_TYPES = [
  { value: 'approval-required', label: 'Hold for a person’s approval' },
  { value: 'deny', label: 'Deny' },
  { value: 'allow', label: 'Allow' },
] as const;

/** The list's links: this page with the filter kept and the cursor changed. */
const href = (base: string, decision: string, cursor?: string) => {
  const p = new URLSearchParams();
  if (decision) p.set('decision', decision);
  if (cursor) p.set('cursor', cursor);
  const s = p.toString();
  return s ? `${base}?${s}` : base;
};

type NewForm = { name: string; type: string; tools: string };

export async function policiesRoutes(app: FastifyInstance, deps: DashboardDeps, signedIn: preHandlerHookHandler): Promise<void> {
  async function listPage(req: FastifyRequest, reply: FastifyReply, form?: { errors: FieldError[]; values: NewForm }) {
    const person = req.person!;
    const q = query(req);
    const decision = outcomeOf(q.decision);
    const [policies, counts, decisions] = await Promise.all([listPolicies(deps, person.orgId), decisionCounts(deps.db, person.orgId), listDecisions(deps.db, person.orgId, { decision, cursor: q.cursor, limit: PAGE })]);
    const names = new Map(policies.map((p) => [p.id, p.name]));
    const admin = await adminOf(deps, person, null);
    return sendPage(
      reply,
      <Shell person={person} title="Policies" active="policies" path="/dashboard/policies" notice={takeFlash(req, reply)} styles={['flows.css']}>
        <p class="lede">Every call an agent makes is asked of these policies, in this order; the first that matches decides. They govern every project of the organization.</p>
        <PolicyTable policies={policies} counts={counts} />
        <h2 id="decisions-title">Decisions</h2>
        <DecisionFilter action="/dashboard/policies" value={decision ?? ''} />
        <DecisionTable rows={decisions.rows} now={deps.now()} names={names} caption="The decisions policies made, newest first" prev={q.cursor ? href('/dashboard/policies', decision ?? '') : undefined} next={decisions.next ? href('/dashboard/policies', decision ?? '', decisions.next) : undefined} />
        {admin ? <NewPolicy csrf={person.csrfToken} form={form} /> : <p id="cannot-change">Changing policies needs the admin role; ask an admin or owner.</p>}
      </Shell>,
      form ? 400 : 200,
    );
  }

  app.get('/dashboard/policies', { preHandler: signedIn }, (req, reply) => listPage(req, reply));

  app.post('/dashboard/policies', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    if (!csrfOk(req, deps.baseUrl, person)) return refusedPage(reply);
    if (!(await adminOf(deps, person, null))) return roleRefusedPage(reply, person, 'admin', 'policies');
    const values: NewForm = { name: formField(req.body, 'name').trim(), type: formField(req.body, 'type'), tools: formField(req.body, 'tools') };
    const errors: FieldError[] = [];
    if (values.name.length < 1 || values.name.length > 200) errors.push({ field: 'policy-name', message: 'Enter a name of 1 to 200 characters' });
    const type = NEW_TYPES.find((t) => t.value === values.type)?.value;
    if (!type) errors.push({ field: 'policy-type', message: 'Choose what the policy does' });
    const tools = values.tools.split(/[\s,]+/).filter(Boolean);
    if (tools.length > 100 || !tools.every((x) => Pattern.safeParse(x).success)) errors.push({ field: 'policy-tools', message: 'Enter tool names such as mandate.spend, or a prefix ending in * such as mandate.*, separated by commas' });
    if (errors.length > 0 || !type) return listPage(req, reply, { errors, values });
    try {
      const p = await createPolicy(ctx(deps, req, person), { name: values.name, type, tools });
      flash(reply, `Policy “${p.name}” added, last in the order; it applies from the next call.`);
      return reply.redirect(`/dashboard/policies/${encodeURIComponent(p.id)}`, 303);
    } catch (err) {
      if (!(err instanceof Rejection)) throw err;
      return listPage(req, reply, { errors: [{ field: 'policy-name', message: rejectionText(err) }], values });
    }
  });

  app.get('/dashboard/policies/:id', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const p = await find(deps, person, (req.params as { id: string }).id);
    if (!p) return notFoundIn(reply, person, 'policies', 'policy', { href: '/dashboard/policies', label: 'the policies' }, 'This organization');
    const q = query(req);
    const decision = outcomeOf(q.decision);
    const base = `/dashboard/policies/${encodeURIComponent(p.id)}`;
    const decisions = await listDecisions(deps.db, person.orgId, { ruleId: p.id, decision, cursor: q.cursor, limit: PAGE });
    return sendPage(
      reply,
      <Shell person={person} title={`Policy: ${p.name}`} active="policies" path={base} notice={takeFlash(req, reply)} styles={['flows.css']}>
        <p class="lede">
          <a href="/dashboard/policies">All policies</a>
        </p>
        <PolicySettings p={p} />
        {(await adminOf(deps, person, null)) ? <EnableForm p={p} csrf={person.csrfToken} /> : <p id="cannot-change">Changing policies needs the admin role; ask an admin or owner.</p>}
        <h2 id="decisions-title">Its decisions</h2>
        <DecisionFilter action={base} value={decision ?? ''} />
        <DecisionTable rows={decisions.rows} now={deps.now()} names={new Map([[p.id, p.name]])} caption={`What “${p.name}” decided, newest first`} prev={q.cursor ? href(base, decision ?? '') : undefined} next={decisions.next ? href(base, decision ?? '', decisions.next) : undefined} />
      </Shell>,
    );
  });

  app.post('/dashboard/policies/:id/enabled', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    if (!csrfOk(req, deps.baseUrl, person)) return refusedPage(reply);
    const p = await find(deps, person, (req.params as { id: string }).id);
    if (!p) return notFoundIn(reply, person, 'policies', 'policy', { href: '/dashboard/policies', label: 'the policies' }, 'This organization');
    if (!(await adminOf(deps, person, null))) return roleRefusedPage(reply, person, 'admin', 'policies');
    const enabled = formField(req.body, 'enabled') === 'true';
    try {
      await updatePolicy(ctx(deps, req, person), p.id, { enabled });
      flash(reply, enabled ? 'Enabled: it applies from the next call.' : 'Disabled: it is skipped from the next call.');
    } catch (err) {
      if (!(err instanceof Rejection)) throw err;
      flash(reply, rejectionText(err), 'error');
    }
    return reply.redirect(`/dashboard/policies/${encodeURIComponent(p.id)}`, 303);
  });
}

async function find(deps: DashboardDeps, person: Person, id: string): Promise<PolicyRow | undefined> {
  if (!ID.test(id)) return undefined;
  return getPolicy(deps, person.orgId, id).catch((err: unknown) => {
    if (err instanceof Rejection && err.code === 'not_found') return undefined;
    throw err;
  });
}

function NewPolicy({ csrf, form }: { csrf: string; form?: { errors: FieldError[]; values: NewForm } | undefined }) {
  const err = (f: string) => form?.errors.find((e) => e.field === f)?.message;
  return (
    <section aria-labelledby="new-policy-title" class="panel">
      <h2 id="new-policy-title">Add a policy</h2>
      <ErrorSummary errors={form?.errors ?? []} />
      <PostForm action="/dashboard/policies" csrf={csrf} id="new-policy">
        <Field id="policy-name" name="name" label="Name" value={form?.values.name} error={err('policy-name')} maxLength={200} />
        <Select id="policy-type" name="type" label="What it does" options={NEW_TYPES} value={form?.values.type ?? 'approval-required'} error={err('policy-type')} />
        <Field id="policy-tools" name="tools" label="Tools it applies to" hint="Tool names or prefixes ending in *, separated by commas; empty for every tool. It applies to every agent." value={form?.values.tools} error={err('policy-tools')} />
        <Button id="add-policy">Add policy</Button>
      </PostForm>
    </section>
  );
}

