import type { FastifyInstance, FastifyReply, preHandlerHookHandler } from 'fastify';
import { Rejection } from '../eventstore/handler.ts';
import { assetUrl } from './assets.ts';
import { acknowledgeIncident, auditHealth, listAuditEvents, listIncidents, readAuditConfig, updateAuditConfig } from '../usecases/audit.ts';
import { auditEntries, inclusionProof, latestCheckpoint, publishedVerifierKey } from '../usecases/audit-proofs.ts';
import { AckForm, CheckpointSection, ConfigSection, ExplorerSection, HealthSection, IncidentsSection } from './audit-view.tsx';
import { parseAckForm, parseConfigForm, parseExplorer } from './audit-forms.ts';
import type { FieldError } from './components.tsx';
import { atLeast, csrfOk, flash, formField, personRun, takeFlash, type DashboardDeps } from './context.ts';
import { Shell, sendPage } from './layout.tsx';
import { refusedPage, roleRefusedPage } from './refused.tsx';
import type { Person } from './session.ts';

// The audit page: the chain's health and size, the latest checkpoint and its
// witnesses, the incidents (acknowledge: human-session-only, admin), the
// verification thresholds (change: human-session-only, admin), and the event
// explorer with an in-browser verify per entry, fed by two JSON routes here
// (the entry, and its inclusion proof with the signed checkpoint) over the
// same use cases as /v1/audit-events/*. Every change records the person as
// its actor; the refusals are the API's.

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const SEQ = /^[1-9]\d{0,15}$/;
const isAdmin = (p: Person) => atLeast(p.role, 'admin');

const json = (reply: FastifyReply, status: number, body: unknown) => reply.code(status).header('cache-control', 'no-store').header('x-content-type-options', 'nosniff').type('application/json; charset=utf-8').send(JSON.stringify(body));

export async function auditPageRoutes(app: FastifyInstance, deps: DashboardDeps, signedIn: preHandlerHookHandler): Promise<void> {
  const page = async (reply: FastifyReply, person: Person, query: unknown, opts: { notice?: ReturnType<typeof takeFlash>; configErrors?: FieldError[]; status?: number } = {}) => {
    const now = deps.now();
    const explorer = parseExplorer(query, now);
    const [h, cfg, incidents, cp, key] = await Promise.all([
      auditHealth(deps, person.orgId),
      readAuditConfig(deps, person.orgId),
      listIncidents(deps, { orgId: person.orgId }, ['open', 'acknowledged']),
      latestCheckpoint(deps, person.orgId).catch((err) => {
        if (err instanceof Rejection && err.code === 'not_found') return null;
        throw err;
      }),
      publishedVerifierKey(deps, person.orgId),
    ]);
    const listed = explorer.ok ? await listAuditEvents(deps, { orgId: person.orgId }, { ...explorer.value, limit: 50 }) : { events: [], next_before_sequence: null };
    const filter = explorer.ok ? explorer.value.filter : { type: '', from: '', to: '', before: '' };
    return sendPage(
      reply,
      <Shell person={person} title="Audit" active="audit" path="/dashboard/audit" notice={opts.notice} styles={['flows.css']}> 
        <script type="module" src={assetUrl('verify-entry.js')} />
        <HealthSection h={h} now={now} />
        <CheckpointSection cp={cp} witnesses={h.witnesses} />
        <IncidentsSection incidents={incidents} now={now} mayAct={isAdmin(person)} />
        <ConfigSection cfg={cfg} csrf={person.csrfToken} mayAct={isAdmin(person)} errors={opts.configErrors ?? []} />
        <ExplorerSection events={listed.events} next={listed.next_before_sequence} filter={filter} errors={explorer.ok ? [] : explorer.errors} origin={key.origin} verifierKey={key.verifier_key} now={now} />
      </Shell>,
      opts.status ?? (explorer.ok ? 200 : 400),
    );
  };

  app.get('/dashboard/audit', { preHandler: signedIn }, async (req, reply) => page(reply, req.person!, req.query, { notice: takeFlash(req, reply) }));

  app.post('/dashboard/audit/config', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    if (!csrfOk(req, deps.baseUrl, person)) return refusedPage(reply);
    if (!isAdmin(person)) return roleRefusedPage(reply, person, 'admin', 'audit');
    const parsed = parseConfigForm(req.body);
    if (!parsed.ok) return page(reply, person, {}, { notice: { text: 'Nothing was changed.', tone: 'error' }, configErrors: parsed.errors, status: 400 });
    try {
      await updateAuditConfig(deps, personRun(deps, req, person), person.orgId, parsed.value);
    } catch (err) {
      if (!(err instanceof Rejection) || (err.code !== 'regulatory_minimum_violation' && err.code !== 'window_ordering_invalid')) throw err;
      const field = err.code === 'regulatory_minimum_violation' ? 'hot_max_staleness_seconds' : 'hot_window_days';
      return page(reply, person, {}, { notice: { text: 'Nothing was changed.', tone: 'error' }, configErrors: [{ field, message: `${err.message}.` }], status: 400 });
    }
    flash(reply, 'Thresholds saved; the verifier uses them from its next pass.');
    return reply.redirect('/dashboard/audit#config-title', 303);
  });

  const incidentOf = async (person: Person, id: string) => (UUID.test(id) ? (await listIncidents(deps, { orgId: person.orgId }, ['open', 'acknowledged'])).find((i) => i.id === id) : undefined);

  app.get('/dashboard/audit/incidents/:id', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const incident = await incidentOf(person, (req.params as { id: string }).id);
    if (!incident) return noIncident(reply, person);
    if (!isAdmin(person)) return roleRefusedPage(reply, person, 'admin', 'audit');
    return ackPage(reply, person, incident, [], {}, takeFlash(req, reply));
  });

  app.post('/dashboard/audit/incidents/:id/acknowledge', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    if (!csrfOk(req, deps.baseUrl, person)) return refusedPage(reply);
    const incident = await incidentOf(person, (req.params as { id: string }).id);
    if (!incident) return noIncident(reply, person);
    if (!isAdmin(person)) return roleRefusedPage(reply, person, 'admin', 'audit');
    const parsed = parseAckForm(req.body);
    const values = Object.fromEntries(['personal_data_affected', 'anpd_notification_status', 'resolution_summary', 'incident_reference'].map((k) => [k, formField(req.body, k)]));
    if (!parsed.ok) return ackPage(reply, person, incident, parsed.errors, values, { text: 'Nothing was changed.', tone: 'error' }, 400);
    try {
      await acknowledgeIncident(deps, personRun(deps, req, person), { orgId: person.orgId }, { id: incident.id, ack: parsed.value, by: person.userId });
      flash(reply, 'Incident acknowledged. Health turns green only after a clean re-verification.');
    } catch (err) {
      if (!(err instanceof Rejection) || err.code !== 'incident_already_acknowledged') throw err;
      flash(reply, 'Someone acknowledged this incident first: yours was not recorded.', 'error');
    }
    return reply.redirect('/dashboard/audit#incidents-title', 303);
  });

  app.get('/dashboard/audit/entries/:seq', { preHandler: signedIn }, async (req, reply) => {
    const seq = (req.params as { seq: string }).seq;
    if (!SEQ.test(seq)) return json(reply, 404, { error: { code: 'not_found', message: 'no entry with this sequence number' } });
    const { entries } = await auditEntries(deps, req.person!.orgId, { after_sequence: Number(seq) - 1, limit: 1 });
    const entry = entries[0];
    if (!entry || entry.sequence_number !== Number(seq)) return json(reply, 404, { error: { code: 'not_found', message: 'no entry with this sequence number' } });
    return json(reply, 200, { entry });
  });

  app.get('/dashboard/audit/entries/:seq/proof', { preHandler: signedIn }, async (req, reply) => {
    const seq = (req.params as { seq: string }).seq;
    if (!SEQ.test(seq)) return json(reply, 404, { error: { code: 'not_found', message: 'no entry with this sequence number' } });
    try {
      return json(reply, 200, await inclusionProof(deps, req.person!.orgId, Number(seq)));
    } catch (err) {
      if (!(err instanceof Rejection)) throw err;
      const status = err.code === 'not_found' ? 404 : 409;
      return json(reply, status, { error: { code: err.code, message: err.message } });
    }
  });
}

function ackPage(reply: FastifyReply, person: Person, incident: Parameters<typeof AckForm>[0]['incident'], errors: FieldError[], values: Record<string, string>, notice: ReturnType<typeof takeFlash>, status = 200) {
  return sendPage(
    reply,
    <Shell person={person} title={`Acknowledge incident ${incident.kind} at entry ${incident.detected_at_sequence}`} active="audit" path="/dashboard/audit" notice={notice} styles={['flows.css']}>
      <AckForm incident={incident} csrf={person.csrfToken} errors={errors} values={values} />
    </Shell>,
    status,
  );
}

function noIncident(reply: FastifyReply, person: Person) {
  return sendPage(
    reply,
    <Shell person={person} title="No such incident" active="audit" notice={{ text: 'Nothing was changed.', tone: 'error' }}>
      <p id="not-found">
        This organization has no incident with that id. See the <a href="/dashboard/audit">audit page</a>.
      </p>
    </Shell>,
    404,
  );
}
