import type { FastifyInstance, FastifyRequest, preHandlerHookHandler } from 'fastify';
import { Rejection } from '../eventstore/handler.ts';
import { agentSpends, agentToolCalls, browseAgents } from '../usecases/agent-activity.ts';
import { didDocument, getAgent, revokeAgent, revokeAgentKey, rotateAgentKey } from '../usecases/agents.ts';
import { AgentView } from './agents-view.tsx';
import { Badge, type Column, Time } from './components.tsx';
import { action, adminHere, BrowseList, confirmed, notFoundIn, queryOf } from './browse.tsx';
import { type DashboardDeps, formField, personRun, takeFlash } from './context.ts';
import { DASHBOARD_HEADERS, Shell, sendPage } from './layout.tsx';
import type { AgentView as Agent } from '../usecases/agents.ts';

// Agents: the organization's identities (a page at a time), one agent's keys
// (rotate, revoke), its did:web document, and the spends and tool calls it
// made in the current project. Rotating and revoking are the use cases of
// POST /v1/agents/:id/keys/rotate and …/keys/:kid/revoke, run as the person
// (an admin or owner), recorded with the person as actor.

const HANDLE = /^[A-Za-z0-9._-]{1,64}$/;
const PAGE = 50;

function AgentsPage({ req, agents, next, now, notice }: { req: FastifyRequest; agents: Agent[]; next: string | null; now: Date; notice: ReturnType<typeof takeFlash> }) {
  const person = req.person!;
  const columns: Column<Agent>[] = [
    { label: 'Agent', cell: (a) => <a href={`/dashboard/agents/${encodeURIComponent(a.agent_id)}`}>{a.display_name ?? a.agent_id}</a> },
    { label: 'Handle', cell: (a) => <code>{a.agent_id}</code> },
    { label: 'Status', cell: (a) => (a.status === 'active' ? <Badge tone="ok">Active</Badge> : <Badge tone="danger">Revoked</Badge>) },
    { label: 'Keys', cell: (a) => `${a.keys.filter((k) => k.status === 'active').length} active, ${a.keys.length} in all`, numeric: true },
    { label: 'Registered', cell: (a) => <Time iso={a.created_at} now={now} /> },
  ];
  return (
    <Shell person={person} title="Agents" active="agents" path="/dashboard/agents" notice={notice}>
      <p>The identities your programs act as: each signs with an Ed25519 key kept in the vault, and is known to others by its did:web document.</p>
      <BrowseList req={req} caption="Agents, newest first" columns={columns} rows={agents} id="agents" empty="No agents yet." cursor="before" next={next} label="agents">
        <p>Register one with <code>POST /v1/agents</code>.</p>
      </BrowseList>
    </Shell>
  );
}

export async function agentRoutes(app: FastifyInstance, deps: DashboardDeps, signedIn: preHandlerHookHandler): Promise<void> {
  app.get('/dashboard/agents', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const page = await browseAgents(deps, person.orgId, { before: queryOf(req, 'before'), limit: PAGE });
    return sendPage(reply, <AgentsPage req={req} agents={page.rows} next={page.next} now={deps.now()} notice={takeFlash(req, reply)} />);
  });

  app.get('/dashboard/agents/:handle', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const agent = await findAgent(deps, person.orgId, (req.params as { handle: string }).handle);
    if (!agent) return notFoundIn(reply, person, 'agents', 'agent', { href: '/dashboard/agents', label: 'the agents' });
    const tenant = { orgId: person.orgId, projectId: person.projectId };
    const [spends, calls] = await Promise.all([
      agentSpends(deps, tenant, agent.agent_id, { before: queryOf(req, 'spends_before'), limit: PAGE }),
      agentToolCalls(deps, tenant, agent.agent_id, { before: queryOf(req, 'calls_before'), limit: PAGE }),
    ]);
    return sendPage(
      reply,
      <AgentView req={req} agent={agent} spends={spends} calls={calls} now={deps.now()} mayAct={await adminHere(deps, person)} didUrl={didUrl(deps.didDomain, agent)} notice={takeFlash(req, reply)} />,
    );
  });

  // The document itself, as its resolver serves it, to download.
  app.get('/dashboard/agents/:handle/did.json', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const agent = await findAgent(deps, person.orgId, (req.params as { handle: string }).handle);
    if (!agent) return notFoundIn(reply, person, 'agents', 'agent', { href: '/dashboard/agents', label: 'the agents' });
    return reply
      .headers({ ...DASHBOARD_HEADERS, 'content-disposition': `attachment; filename="${agent.agent_id}.did.json"` })
      .type('application/did+json')
      .send(`${JSON.stringify(didDocument(agent), null, 2)}\n`);
  });

  const back = (req: FastifyRequest) => `/dashboard/agents/${encodeURIComponent((req.params as { handle: string }).handle)}`;
  const handleOf = (req: FastifyRequest) => {
    const h = (req.params as { handle: string }).handle;
    if (!HANDLE.test(h)) throw new Rejection('agent_not_found', 'agent not found');
    return h;
  };
  const refusal = (r: Rejection) => AGENT_REFUSALS[r.code];
  action(app, deps, signedIn, '/dashboard/agents/:handle/rotate', {
    active: 'agents',
    back,
    refusal,
    act: async (req, person) => {
      const r = await rotateAgentKey(deps, personRun(deps, req, person), { orgId: person.orgId }, handleOf(req));
      return `The key is rotated: ${r.kid} signs from now on; ${r.retired_kid} is retired (it still verifies what it signed, and signs nothing more).`;
    },
  });
  action(app, deps, signedIn, '/dashboard/agents/:handle/keys/revoke', {
    active: 'agents',
    back,
    refusal,
    act: async (req, person) => {
      const kid = formField(req.body, 'kid').slice(0, 400);
      const r = await revokeAgentKey(deps, personRun(deps, req, person), { orgId: person.orgId }, handleOf(req), kid);
      return `The key ${r.kid} is revoked: its DID document no longer lists it.`;
    },
  });
  action(app, deps, signedIn, '/dashboard/agents/:handle/revoke', {
    active: 'agents',
    back,
    refusal,
    act: async (req, person) => {
      confirmed(req.body, 'Revoking the agent cannot be undone');
      const r = await revokeAgent(deps, personRun(deps, req, person), { orgId: person.orgId }, handleOf(req));
      return `The agent is revoked: ${r.revoked_kids.length} ${r.revoked_kids.length === 1 ? 'key' : 'keys'} revoked. Its mandates are not changed: pause or revoke them on their pages.`;
    },
  });
}

const AGENT_REFUSALS: Record<string, string> = {
  agent_not_found: 'That agent no longer exists: reload the page.',
  agent_already_revoked: 'The agent is already revoked.',
  no_active_key: 'The agent has no active key to rotate (it is revoked).',
  key_not_found: 'That key is not one of this agent’s: reload the page.',
  key_already_revoked: 'That key is already revoked.',
};

async function findAgent(deps: DashboardDeps, orgId: string, handle: string): Promise<Agent | undefined> {
  if (!HANDLE.test(handle)) return undefined;
  try {
    return await getAgent(deps, { orgId }, handle);
  } catch (err) {
    if (err instanceof Rejection) return undefined;
    throw err;
  }
}

/** Where a did:web resolves: https://<domain>/<org>/<handle>/did.json (the domain's %3A is its port). */
function didUrl(didDomain: string, agent: Agent): string {
  const parts = agent.agent_did.slice('did:web:'.length).split(':');
  return `https://${decodeURIComponent(didDomain)}/${parts.slice(1).join('/')}/did.json`;
}
