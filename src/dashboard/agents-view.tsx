import type { FastifyRequest } from 'fastify';
import type { AgentKeyView, AgentView as Agent } from '../usecases/agents.ts';
import { didDocument } from '../usecases/agents.ts';
import type { AgentSpend, AgentToolCall, Page } from '../usecases/agent-activity.ts';
import { Badge, Button, type Column, Copyable, EmptyState, PostForm, Table, Time } from './components.tsx';
import { ConfirmBox, Facts, ListPages } from './browse.tsx';
import { Shell } from './layout.tsx';
import { formatMinor } from './money.ts';
import { declineWords } from './mandates-view.tsx';

// One agent's page: who it is, its keys (rotate, revoke), its did:web
// document as a labelled list (the JSON itself is a download), and what it did
// in the current project: spend decisions on its mandates, tool calls of its
// sessions, each list growing by a cursor.

const KEY_TONE = { active: 'ok', retired: 'neutral', revoked: 'danger' } as const;

type Props = { req: FastifyRequest; agent: Agent; spends: Page<AgentSpend>; calls: Page<AgentToolCall>; now: Date; mayAct: boolean; didUrl: string; notice: { text: string; tone: 'ok' | 'error' } | null };

export function AgentView({ req, agent, spends, calls, now, mayAct, didUrl, notice }: Props) {
  const person = req.person!;
  const self = `/dashboard/agents/${encodeURIComponent(agent.agent_id)}`;
  return (
    <Shell person={person} title={`Agent ${agent.display_name ?? agent.agent_id}`} active="agents" path={self} notice={notice} styles={['money.css']}>
      <p>
        <a href="/dashboard/agents">All agents</a>
      </p>
      <Facts
        id="agent-facts"
        items={[
          ['DID', <Copyable value={agent.agent_did} label="the agent's DID" />],
          ['Handle', <code>{agent.agent_id}</code>],
          ['Principal', agent.principal_ref],
          ['Status', agent.status === 'active' ? <Badge tone="ok">Active</Badge> : <Badge tone="danger">Revoked</Badge>],
          ['Registered', <Time iso={agent.created_at} now={now} />],
          ...(agent.revoked_at ? ([['Revoked', <Time iso={agent.revoked_at} now={now} />]] as [string, preact.ComponentChildren][]) : []),
        ]}
      />
      <Keys agent={agent} self={self} csrf={person.csrfToken} now={now} mayAct={mayAct} />
      <DidSection agent={agent} self={self} didUrl={didUrl} />
      <section aria-labelledby="spends-title">
        <h2 id="spends-title">Spends</h2>
        {spends.rows.length === 0 ? <EmptyState title="No spends by this agent in this project." /> : <Table caption="Spend decisions on this agent's mandates, newest first" columns={SPEND_COLUMNS} rows={spends.rows} id="agent-spends" />}
        <ListPages req={req} cursor="spends_before" next={spends.next} label="spends" />
      </section>
      <section aria-labelledby="calls-title">
        <h2 id="calls-title">Tool calls</h2>
        {calls.rows.length === 0 ? <EmptyState title="No tool calls by this agent in this project." /> : <Table caption="Tool calls of this agent's sessions, newest first" columns={callColumns(now)} rows={calls.rows} id="agent-calls" />}
        <ListPages req={req} cursor="calls_before" next={calls.next} label="tool calls" />
      </section>
    </Shell>
  );
}

function Keys({ agent, self, csrf, now, mayAct }: { agent: Agent; self: string; csrf: string; now: Date; mayAct: boolean }) {
  const columns: Column<AgentKeyView>[] = [
    { label: 'Key id', cell: (k) => <Copyable value={k.kid} label={`key ${k.ordinal}`} /> },
    { label: 'Status', cell: (k) => <Badge tone={KEY_TONE[k.status]}>{k.status === 'active' ? 'Active: signs' : k.status === 'retired' ? 'Retired: verifies only' : 'Revoked'}</Badge> },
    { label: 'Created', cell: (k) => <Time iso={k.created_at} now={now} /> },
    { label: 'Retired', cell: (k) => (k.retired_at ? <Time iso={k.retired_at} now={now} /> : '—') },
    { label: 'Revoked', cell: (k) => (k.revoked_at ? <Time iso={k.revoked_at} now={now} /> : '—') },
    ...(mayAct
      ? [
          {
            label: 'Action',
            cell: (k: AgentKeyView) =>
              k.status === 'revoked' ? (
                '—'
              ) : (
                <PostForm action={`${self}/keys/revoke`} csrf={csrf} inline>
                  <input type="hidden" name="kid" value={k.kid} />
                  <Button kind="danger" small id={`revoke-key-${k.ordinal}`}>
                    Revoke<span class="visually-hidden"> key {k.ordinal}</span>
                  </Button>
                </PostForm>
              ),
          },
        ]
      : []),
  ];
  return (
    <section aria-labelledby="keys-title">
      <h2 id="keys-title">Keys</h2>
      <Table caption="The agent's signing keys, oldest first" columns={columns} rows={agent.keys} id="agent-keys" />
      {mayAct && agent.status === 'active' ? (
        <div class="actions">
          <PostForm action={`${self}/rotate`} csrf={csrf} inline>
            <Button id="rotate-key">Rotate the signing key</Button>
          </PostForm>
          <PostForm action={`${self}/revoke`} csrf={csrf} inline>
            <ConfirmBox id="confirm-revoke-agent" label="Revoking the agent cannot be undone" />
            <Button kind="danger" id="revoke-agent">
              Revoke the agent
            </Button>
          </PostForm>
        </div>
      ) : null}
      {mayAct ? (
        <p class="hint">Rotating makes a new key the one that signs; the old one is retired and still verifies what it signed. Revoking a key removes it from the DID document; revoking the agent revokes every key and leaves its mandates as they are.</p>
      ) : (
        <p id="agent-read-only">Admins and owners rotate and revoke keys.</p>
      )}
    </section>
  );
}

type Method = { id: string; type: string; publicKeyJwk: { crv: string; x: string } };

function DidSection({ agent, self, didUrl }: { agent: Agent; self: string; didUrl: string }) {
  const doc = didDocument(agent) as { id: string; controller: string; verificationMethod: Method[]; authentication: string[]; assertionMethod: string[]; deactivated?: boolean };
  return (
    <section aria-labelledby="did-title">
      <h2 id="did-title">DID document</h2>
      <p>
        Others resolve <code>{doc.id}</code> at <code>{didUrl}</code>. <a href={`${self}/did.json`} download>Download the document (JSON)</a>
      </p>
      {doc.deactivated ? <p id="did-deactivated">The document says the DID is deactivated: it lists no keys.</p> : null}
      <Facts id="did-document" items={[['Id', <code>{doc.id}</code>], ['Controller', <code>{doc.controller}</code>]]} />
      {doc.verificationMethod.length === 0 ? null : (
        <Table
          caption="Verification methods (JsonWebKey2020, Ed25519)"
          id="did-methods"
          rows={doc.verificationMethod}
          columns={[
            { label: 'Key id', cell: (m) => <code>{m.id}</code> },
            { label: 'Public key (x)', cell: (m) => <code>{m.publicKeyJwk.x}</code> },
            { label: 'Authenticates', cell: (m) => (doc.authentication.includes(m.id) ? 'Yes' : 'No') },
            { label: 'Asserts', cell: (m) => (doc.assertionMethod.includes(m.id) ? 'Yes' : 'No') },
          ]}
        />
      )}
    </section>
  );
}

const SPEND_COLUMNS: Column<AgentSpend>[] = [
  { label: 'When', cell: (s) => <time dateTime={s.at}>{s.at.replace('T', ' ').slice(0, 16)} UTC</time> },
  { label: 'Amount', cell: (s) => formatMinor(s.amount_minor, s.currency), numeric: true },
  { label: 'Merchant', cell: (s) => s.merchant },
  { label: 'Decision', cell: (s) => (s.decision === 'approved' ? <Badge tone="ok">Approved</Badge> : <Badge tone="danger">Declined</Badge>) },
  { label: 'Why', cell: (s) => (s.code ? declineWords(s.code) : '—') },
  { label: 'Mandate', cell: (s) => <a href={`/dashboard/mandates/${encodeURIComponent(s.mandate_id)}`}>{s.mandate_id}</a> },
];

const callColumns = (now: Date): Column<AgentToolCall>[] => [
  { label: 'When', cell: (c) => <Time iso={c.called_at} now={now} /> },
  { label: 'Tool', cell: (c) => <code>{c.tool_name}</code> },
  { label: 'Server', cell: (c) => c.server_id },
  { label: 'Status', cell: (c) => (c.status === 'success' ? <Badge tone="ok">Succeeded</Badge> : c.status === 'error' ? <Badge tone="danger">{c.error_code ?? 'Failed'}</Badge> : <Badge tone="warn">Running</Badge>) },
  { label: 'Duration', cell: (c) => (c.duration_ms === null ? '—' : `${c.duration_ms} ms`), numeric: true },
  { label: 'Call', cell: (c) => <code>{c.id}</code> },
];
