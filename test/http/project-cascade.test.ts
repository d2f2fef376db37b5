import t, { type Test } from 'tap';
import { orgDecider, orgStream } from '../../commands/org.ts';
import { handleCommand } from '../../src/eventstore/handler.ts';
import type { RunCommand } from '../../src/http/kernel/route.ts';
import { cascadeProjectDeletion } from '../../src/reactors/project-cascade.ts';
import { bootstrapOrg, type Org, testApp } from '../helpers/app.ts';
import { until } from '../helpers/wait.ts';

// DELETE /v1/projects/{id} cascades to the project's connection records,
// triggers (webhook endpoints), session history (sessions and their tool
// calls) and API keys, with the vault rows of the connections and endpoints
// purged; never to another project's or organization's records. The request
// finishes the cascade before its 200; after a crash between the
// organization's append and the end of that cascade, the reactor finishes it.

const logs: string[] = [];
const { app, ledger, sandboxProviders, vault } = await testApp(t, { providers: true, logStream: { write: (l: string) => void logs.push(l) } });
const sb = sandboxProviders!;
const org = await bootstrapOrg(app, 'Cascade');
const stranger = await bootstrapOrg(app, 'Bystander');
/** Every secret value this file handled, for the scan at the end. */
const secrets: string[] = [];

type Held = { orgId: string; projectId: string; userId: string; headers: Record<string, string>; connectionId: string; endpointId: string; sessionId: string; toolCallId: string; refs: string[] };

async function newProject(slug: string): Promise<string> {
  const r = await app.inject({ method: 'POST', url: '/v1/projects', headers: org.key, payload: { name: slug, slug } });
  if (r.statusCode !== 201) throw new Error(`project: ${r.body}`);
  return r.json().id;
}

/** A connection (with a webhook secret), a webhook endpoint, and a session with one tool call, in the project. */
async function populate(o: Org, projectId: string, tag: string): Promise<Held> {
  const headers = { ...o.key, 'x-svc-project': projectId };
  const ok = async (method: 'POST' | 'PUT', url: string, payload: object, status: number) => {
    const r = await app.inject({ method, url, headers, payload });
    if (r.statusCode !== status) throw new Error(`${method} ${url}: ${r.statusCode} ${r.body}`);
    return r.json();
  };
  const credential = sb.issueCredential('acme-payments');
  if (typeof credential === 'string') secrets.push(credential);
  else secrets.push(...Object.values(credential));
  const conn = await ok('POST', '/v1/connections', { server_id: 'acme-payments', secret: credential, user_id: tag }, 201);
  secrets.push((await ok('PUT', `/v1/connections/${conn.id}/webhook-secret`, {}, 200)).secret);
  const endpoint = await ok('POST', '/v1/webhook-endpoints', { event: 'consumer.created', name: tag, webhook_url: `https://hooks.example.com/${tag}` }, 201);
  secrets.push(endpoint.secret);
  const session = await ok('POST', '/v1/sessions', { servers: ['clima', 'acme-payments'], user_id: tag }, 201);
  const call = await ok('POST', `/v1/sessions/${session.id}/execute`, { tool: 'clima/get_forecast', input: { city: 'Recife' } }, 200);
  const c = await ledger.db.query<{ secret_ref: string; webhook_secret_ref: string }>('SELECT secret_ref, webhook_secret_ref FROM connections WHERE id = $1', [conn.id]);
  const w = await ledger.db.query<{ secret_ref: string }>('SELECT secret_ref FROM webhook_endpoints WHERE id = $1', [endpoint.id]);
  const refs = [c.rows[0]!.secret_ref, c.rows[0]!.webhook_secret_ref, w.rows[0]!.secret_ref];
  return { orgId: o.orgId, projectId, userId: tag, headers, connectionId: conn.id, endpointId: endpoint.id, sessionId: session.id, toolCallId: call.tool_call_id, refs };
}

/** What the database still holds of the records (SQL on the read models and the vault). */
async function remaining(h: Held) {
  const n = async (sql: string, params: unknown[]) => (await ledger.db.query<{ n: number }>(sql, params)).rows[0]!.n;
  return {
    connection: await n('SELECT count(*)::int AS n FROM connections WHERE id = $1', [h.connectionId]),
    vault: await n('SELECT count(*)::int AS n FROM vault_secrets WHERE ref = ANY($1)', [h.refs]),
    endpoint: await n('SELECT count(*)::int AS n FROM webhook_endpoints WHERE id = $1 AND NOT deleted', [h.endpointId]),
    session: await n('SELECT count(*)::int AS n FROM sessions WHERE id = $1', [h.sessionId]),
    toolCalls: await n('SELECT count(*)::int AS n FROM tool_calls WHERE session_id = $1', [h.sessionId]),
  };
}
const none = { connection: 0, vault: 0, endpoint: 0, session: 0, toolCalls: 0 };
const all = { connection: 1, vault: 3, endpoint: 1, session: 1, toolCalls: 1 };

async function isGone(t: Test, h: Held) {
  t.same(await remaining(h), none, 'no row of the connection, endpoint, session or tool call, and no vault row of theirs (SQL)');
  t.same((await ledger.store.readStream(`connection-${h.connectionId}`)).at(-1)?.type, 'connection.deleted');
  t.same((await ledger.store.readStream(`webhook_endpoint-${h.endpointId}`)).at(-1)?.type, 'webhook_endpoint.deleted');
  t.match((await ledger.store.readStream(`session-${h.sessionId}`)).at(-1), { type: 'session.deleted', data: { session_id: h.sessionId, reason: 'project_deleted' } });
  const quota = (await ledger.store.readStream(`session_quota-${h.orgId}`)).filter((e) => (e.data as { session_id: string }).session_id === h.sessionId).map((e) => e.type);
  t.same(quota, ['session_quota.claimed', 'session_quota.released'], "the session's quota claim is released");
  const slot = (await ledger.store.readStream(`connection_slot-${h.orgId}.${h.projectId}.acme-payments.${h.userId}`)).map((e) => e.type);
  t.same(slot, ['connection_slot.claimed', 'connection_slot.released'], "the connection's slot is released");
}

async function isIntact(t: Test, h: Held) {
  t.same(await remaining(h), all, 'every record and vault row is still there (SQL)');
  const get = async (url: string) => (await app.inject({ method: 'GET', url, headers: h.headers })).statusCode;
  t.same(
    [await get(`/v1/connections/${h.connectionId}`), await get(`/v1/webhook-endpoints/${h.endpointId}`), await get(`/v1/sessions/${h.sessionId}`), await get(`/v1/tool-calls/${h.toolCallId}`)],
    [200, 200, 200, 200],
    'readable by its own project',
  );
  const listed = (await app.inject({ method: 'GET', url: '/v1/tool-calls?limit=200', headers: h.headers })).json().tool_calls.map((c: { id: string }) => c.id);
  t.ok(listed.includes(h.toolCallId), 'its tool call is listed');
}

const systemRun: RunCommand = (decider, stream, command, opts = {}) =>
  handleCommand(ledger.store, decider, stream, command, { orgId: org.orgId, projectId: opts.projectId ?? null, actor: { kind: 'system', id: 'test' }, requestId: null, now: () => new Date() }, opts);

let kept: Held;
let elsewhere: Held;

t.test('DELETE /v1/projects/{id}: the 200 comes after its connections, endpoints, sessions and tool calls are gone; nobody else loses anything', async (t) => {
  const doomedId = await newProject('doomed');
  const doomed = await populate(org, doomedId, 'doomed');
  kept = await populate(org, await newProject('kept'), 'kept');
  elsewhere = await populate(stranger, stranger.projectId, 'elsewhere');
  const bound = (await app.inject({ method: 'POST', url: '/v1/api-keys', headers: org.owner, payload: { name: 'bound', environment: 'test', project_id: doomedId } })).json();
  secrets.push(bound.key);
  const boundKey = { authorization: `Bearer ${bound.key}` };
  const mcpInit = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 't', version: '1' } } };
  const mcp = (headers: Record<string, string>) =>
    app.inject({ method: 'POST', url: `/v1/sessions/${doomed.sessionId}/mcp`, headers: { ...headers, accept: 'application/json, text/event-stream' }, payload: mcpInit });
  t.equal((await mcp(boundKey)).statusCode, 200, 'before: the session answers MCP');

  const del = await app.inject({ method: 'DELETE', url: `/v1/projects/${doomedId}`, headers: org.key });
  t.equal(del.statusCode, 200, del.body);
  t.same(del.json(), { id: doomedId, deleted: true });
  t.notOk(del.headers['x-svc-read-side'], 'the read side had it all');

  await isGone(t, doomed);
  t.same((await mcp(boundKey)).json(), { error: 'unauthorized' }, "MCP: the project's key is revoked");
  t.equal((await mcp({ ...org.key, 'x-svc-project': doomedId })).statusCode, 403, 'MCP: the project is gone');
  t.equal((await mcp(kept.headers)).statusCode, 404, 'MCP: the session is not found from another project');
  t.equal((await app.inject({ method: 'GET', url: `/v1/connections/${doomed.connectionId}`, headers: kept.headers })).statusCode, 404);
  t.equal((await app.inject({ method: 'GET', url: `/v1/tool-calls/${doomed.toolCallId}`, headers: kept.headers })).statusCode, 404);
  const listed = (await app.inject({ method: 'GET', url: '/v1/tool-calls?limit=200', headers: kept.headers })).json().tool_calls.map((c: { id: string }) => c.id);
  t.notOk(listed.includes(doomed.toolCallId), 'the tool call is listed nowhere');
  t.equal((await ledger.db.query('SELECT 1 FROM tool_calls WHERE id = $1', [doomed.toolCallId])).rowCount, 0, 'no tool-call row for anyone (SQL)');

  await t.test('another project of the organization, and another organization, keep everything', async (t) => {
    await isIntact(t, kept);
    await isIntact(t, elsewhere);
  });

  await t.test('running the cascade again changes nothing', async (t) => {
    const head = await ledger.store.headPosition();
    t.equal(await cascadeProjectDeletion({ db: ledger.db, store: ledger.store, vault }, systemRun, org.orgId, doomedId), 0);
    t.equal(await ledger.store.headPosition(), head, 'nothing appended');
  });
});

t.test('after a crash between the organization append and the cascade, the reactor finishes it', async (t) => {
  const crashedId = await newProject('crashed');
  const crashed = await populate(org, crashedId, 'crashed');
  // What the request writes first, and nothing more: the process "dies" before its cascade.
  const r = await handleCommand(ledger.store, orgDecider, orgStream(org.orgId), { type: 'delete_project', projectId: crashedId }, { orgId: org.orgId, projectId: null, actor: { kind: 'system', id: 'test' }, requestId: null, now: () => new Date() });
  t.same(r.events.map((e) => e.type).at(-1), 'project.deleted');
  // The reactor deletes the records, then releases the session's quota claim and the connection's slot: wait for all of it.
  const released = async () => {
    const quota = (await ledger.store.readStream(`session_quota-${crashed.orgId}`)).filter((e) => (e.data as { session_id: string }).session_id === crashed.sessionId);
    const slot = await ledger.store.readStream(`connection_slot-${crashed.orgId}.${crashed.projectId}.acme-payments.${crashed.userId}`);
    return quota.at(-1)?.type === 'session_quota.released' && slot.at(-1)?.type === 'connection_slot.released';
  };
  await until(async () => JSON.stringify(await remaining(crashed)) === JSON.stringify(none) && (await released()), 'the reactor to delete the crashed project\'s records and release its claims');
  await isGone(t, crashed);
  await isIntact(t, kept);
  await isIntact(t, elsewhere);
});

t.test('the audit chains verify afterwards; no secret in any event or log line', async (t) => {
  await ledger.settle();
  t.ok((await ledger.readSide.verifier.verifyOrg(org.orgId)).ok, "the organization's chain verifies (its entries of deleted records stay)");
  t.ok((await ledger.readSide.verifier.verifyOrg(stranger.orgId)).ok, "the bystander's chain verifies");
  const events = await ledger.store.readAll({ maxCount: 100_000 });
  const texts = [...events.map((e) => JSON.stringify({ data: e.data, metadata: e.metadata })), ...logs];
  t.ok(secrets.length >= 10 && logs.length > 20, `scanned ${events.length} events and ${logs.length} log lines for ${secrets.length} secrets`);
  for (const s of secrets) t.notOk(texts.some((x) => x.includes(s)), 'a secret appears nowhere');
});
