import t from 'tap';
import { incidentDecider, incidentStream } from '../../commands/audit.ts';
import { consentDecider, consentStream } from '../../commands/bank-consent.ts';
import { fauthDecider, fauthStream } from '../../commands/x402.ts';
import { approvalDecider, approvalStream } from '../../commands/approval.ts';
import { signupRunDecider, signupRunStream } from '../../commands/signup-run.ts';
import { hostedConnectDecider, hostedConnectStream } from '../../commands/hosted-connect.ts';
import { handleCommand } from '../../src/eventstore/handler.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { until } from '../helpers/wait.ts';

// Generated over every route that takes an id: another organization's id (and
// another project's, where a resource is project-scoped) answers exactly as an
// absent id does: same status, same body apart from request_id.

const { app, ledger } = await testApp(t);
const a = await bootstrapOrg(app, 'Alpha');
const b = await bootstrapOrg(app, 'Beta');
const aUser = (await app.inject({ method: 'POST', url: '/v1/team/members', headers: a.owner, payload: { email: 'u@alpha.example', role: 'member' } })).json().user_id;
const aKey = (await app.inject({ method: 'GET', url: '/v1/api-keys', headers: a.owner })).json().api_keys[0].id;

const aAgent = (await app.inject({ method: 'POST', url: '/v1/agents', headers: a.key, payload: { agent_id: 'buyer', principal_ref: 'person-1' } })).json();
const aConsumer = (await app.inject({ method: 'POST', url: '/v1/consumers', headers: a.key, payload: {} })).json();
const aMandate = await (async () => {
  const created = await app.inject({
    method: 'POST',
    url: '/v1/mandates',
    headers: a.key,
    payload: { consumer_id: aConsumer.id, agent_id: 'buyer', purpose: 'p', merchant_allowlist: ['m'], merchant_pin_kind: 'merchant-id', cap_minor: '100', per_tx_cap_minor: '10', currency: 'BRL', expires_at: Math.floor(Date.now() / 1000) + 3600 },
  });
  return created.json();
})();
const aCard = (await app.inject({ method: 'POST', url: `/v1/consumers/mandates/${aMandate.id}/card`, headers: a.key })).json().card;

const aTrigger = (await app.inject({ method: 'POST', url: '/v1/webhook-endpoints', headers: a.key, payload: { event: 'consumer.created', name: 'hook', webhook_url: 'https://hooks.example.com/in' } })).json();
await app.inject({ method: 'POST', url: '/v1/consumers', headers: a.key, payload: {} });
await ledger.settle();
const aDelivery = await until(
  async () => (await ledger.db.query<{ id: string; event_id: string }>('SELECT id::text, event_id::text FROM webhook_deliveries WHERE trigger_id = $1', [aTrigger.id])).rows[0],
  'a dispatched delivery',
);
// A's browser signup run, written straight to the log (no browser is needed to own one).
const aRun = 'sr_tenancySignupRun0';
await handleCommand(
  ledger.store,
  signupRunDecider,
  signupRunStream(aRun),
  { type: 'start', data: { run_id: aRun, org_id: a.orgId, project_id: a.projectId, server_id: 'acme-payments', user_id: 'ana', email: 'ana@alpha.example', environment: 'test', created_at: new Date().toISOString() } },
  ledger.ctx(a.orgId),
);
// A's hosted-browser connect session, written straight to the log (its session id travels in the finish body, not the path).
const aHosted = 'hcs_tenancyHostedSession0000';
await handleCommand(
  ledger.store,
  hostedConnectDecider,
  hostedConnectStream(aHosted),
  { type: 'start', data: { session_id: aHosted, context_id: 'ctx_tenancy', merchant: 'merchant-a', org_id: a.orgId, project_id: a.projectId, created_at: new Date().toISOString() } },
  ledger.ctx(a.orgId),
);
// A's bank consent, written straight to the log (the sandbox bank is not needed to own one).
const aConsent = 'ofb_tenancyConsent000';
await handleCommand(
  ledger.store,
  consentDecider,
  consentStream(aConsent),
  {
    type: 'initiate',
    data: { consent_id: aConsent, org_id: a.orgId, project_id: a.projectId, consumer_id: aConsumer.id, bank_id: 'sandbox-bank', bank_consent_id: 'urn:x', scopes: ['A'], redirect_url: 'https://x.example', authorisation_url: 'https://bank.example/authorise', wallet_id: null, expires_at: '2030-01-01T00:00:00.000Z', created_at: new Date().toISOString() },
  },
  ledger.ctx(a.orgId),
);
// A's foreign authorization row, written straight to the log.
const aFauth = 'fauth_tenancyFauth0000';
await handleCommand(
  ledger.store,
  fauthDecider,
  fauthStream(aFauth),
  {
    type: 'record',
    events: [
      {
        type: 'x402.authorization_verified',
        data: { foreign_authorization_id: aFauth, org_id: a.orgId, project_id: a.projectId, signer: '0x0000000000000000000000000000000000000001', payee: '0x0000000000000000000000000000000000000002', nonce: `0x${'0'.repeat(64)}`, value_atomic: '1', amount_minor: '1', asset: '0x036CbD53842c5426634e7929541eC2318f3dCF7e', chain_id: 84532, network: 'base-sepolia', mandate_id: 'x402mdt_x', mandate_key: 'x', valid_after: '0', valid_before: '1', signature: '0x', intent: {}, at: new Date().toISOString() },
      },
    ],
  },
  ledger.ctx(a.orgId),
);
// A's provider connection (registering a key does not call the provider).
const aConnection = (await app.inject({ method: 'POST', url: '/v1/connections', headers: a.key, payload: { server_id: 'acme-payments', secret: 'acme_sk_tenancy' } })).json();
const aCounterparty = (await app.inject({ method: 'POST', url: '/v1/counterparties', headers: a.key, payload: { kind: 'supplier', name: 'Alpha supplier' } })).json();
const aNegotiation = (await app.inject({ method: 'POST', url: '/v1/commerce-memory/negotiations', headers: a.key, payload: { counterparty_id: aCounterparty.id, item_ref: 'sku-1', outcome: 'accepted' } })).json();
// A's MCP server, created through the API by A's admin.
const aMcp = (await app.inject({ method: 'POST', url: '/v1/mcp-servers', headers: { ...a.key, 'x-svc-user': a.ownerId }, payload: { consumer_id: 'c', name: 'n', slug: 'tenancy-mcp', upstream_url: 'https://mcp.example.com/mcp', tools: [{ tool_name: 'echo', price: '0.01' }] } })).json();
const aIncident = '7d3c1c7e-2b1a-4c5d-8e9f-0a1b2c3d4e5f';
await handleCommand(ledger.store, incidentDecider, incidentStream(aIncident), { type: 'open', incidentId: aIncident, orgId: a.orgId, kind: 'hash_mismatch', sequence: 1, detail: 'test' }, ledger.ctx(a.orgId));
const aPolicy = (await app.inject({ method: 'POST', url: '/v1/policies', headers: a.key, payload: { name: 'a rule', type: 'deny', agents: ['nobody'] } })).json();
const aApproval = 'apr_tenancyApproval00';
await handleCommand(ledger.store, approvalDecider, approvalStream(aApproval), {
  type: 'request',
  event: { type: 'approval.requested', data: { approval_id: aApproval, org_id: a.orgId, project_id: a.projectId, session_id: null, agent_id: 'buyer', matched_rule_id: aPolicy.id, matched_rule_name: 'a rule', tool_name: 'mandate.spend', tool_input: {}, created_at: new Date().toISOString(), expires_at: '2030-01-01T00:00:00.000Z' } },
}, ledger.ctx(a.orgId));
// A's session and one recorded (failed: no sandbox here) tool call.
const aSession = (await app.inject({ method: 'POST', url: '/v1/sessions', headers: a.key, payload: { servers: ['clima'], user_id: 'u1' } })).json();
const aToolCall = (await app.inject({ method: 'POST', url: `/v1/sessions/${aSession.id}/execute`, headers: a.key, payload: { tool: 'clima/get_forecast', input: { city: 'x' } } })).json().tool_call_id as string;
await ledger.settle();

/** A's real id for each path parameter, by the route family it appears in. */
function realIds(url: string): Record<string, string> {
  if (url.startsWith('/v1/projects')) return { id: a.projectId, user_id: aUser };
  if (url.startsWith('/v1/api-keys')) return { id: aKey };
  if (url.startsWith('/v1/webhook-endpoints/deliveries')) return { delivery_id: aDelivery.id };
  if (url.startsWith('/v1/webhook-endpoints')) return { id: aTrigger.id, delivery_id: aDelivery.id };
  if (url.startsWith('/v1/events')) return { event_id: aDelivery.event_id };
  if (url.startsWith('/v1/bank-consents') || url.startsWith('/v1/ofb/consents')) return { id: aConsent };
  if (url.startsWith('/v1/facilitator/x402/executions')) return { id: aFauth };
  if (url.startsWith('/v1/orgs/:orgId/audit')) return { orgId: a.orgId };
  if (url.startsWith('/v1/orgs/:orgId/approvals')) return { orgId: a.orgId, id: aApproval };
  if (url.startsWith('/v1/approvals')) return { id: aApproval };
  if (url.startsWith('/v1/policies')) return { id: aPolicy.id };
  if (url.startsWith('/v1/audit-events/incidents')) return { id: aIncident };
  if (url.startsWith('/v1/orgs/:orgId/agents')) return { orgId: a.orgId, agentId: 'buyer', kid: aAgent.kid };
  if (url.startsWith('/v1/consumers/mandates')) return { id: aMandate.id };
  if (url.startsWith('/v1/consumers/:consumerId')) return { consumerId: aConsumer.id, key: 'a@example.com', reference: 'pxc_tenancyCharge000', endToEndId: 'E99999008202611230915aB3dE5fG7h9', fundingSourceId: 'fs_tenancyFunding00', verificationId: 'pcv_tenancyVerify000' };
  if (url.startsWith('/v1/consumers')) return { id: aConsumer.id };
  if (url.startsWith('/v1/mandates')) return { id: aMandate.id };
  if (url.startsWith('/v1/test/cards')) return { card_id: aCard.card_id };
  if (url.startsWith('/v1/connections/engine')) return { id: aRun };
  if (url.startsWith('/v1/connections')) return { id: aConnection.id };
  if (url.startsWith('/v1/counterparties') || url.startsWith('/v1/commerce-memory/counterparties')) return { id: aCounterparty.id };
  if (url.startsWith('/v1/commerce-memory/negotiations')) return { id: aNegotiation.id };
  if (url.startsWith('/v1/mcp-servers')) return { id: aMcp.id, tool: 'echo' };
  if (url.startsWith('/v1/agents')) return { agentId: url.endsWith('/revoke') && !url.includes('keys') ? aAgent.agent_did : 'buyer', kid: aAgent.kid };
  if (url.startsWith('/v1/sessions')) return { id: aSession.id };
  if (url.startsWith('/v1/tool-calls')) return { id: aToolCall.slice(3) }; // bare digits: an absent one is digits too
  throw new Error(`no tenancy fixture for ${url}: add one`);
}
const absentIds = (ids: Record<string, string>) =>
  Object.fromEntries(
    Object.entries(ids).map(([k, v]) => [
      k,
      v.startsWith('did:') ? `${v}-absent` : v === aIncident || v === aDelivery.event_id ? '00000000-0000-4000-8000-000000000000' : /^\d+$/.test(v) ? '999999999' : `${v.split('_')[0]}_absentAbsent0000`,
    ]),
  );

/** A body that passes validation, so the request reaches the ownership check. */
const sampleBody: Record<string, unknown> = {
  updateProject: { name: 'Renamed by a stranger' },
  upsertProjectMember: { user_id: 'usr_whoever', role: 'member' },
  updateProjectMember: { role: 'admin' },
  registerAgentOrgScoped: { agent_id: 'newcomer', principal_ref: 'p' },
  signAsAgent: { message: 'hello' },
  updateConsumer: { display_name: 'stranger' },
  spendAgainstMandate: { amount_minor: '1', currency: 'BRL', merchant: 'm' },
  sandboxCardAuthorization: { amount_minor: '1', currency: 'BRL', merchant: 'm' },
  acknowledgeAuditIncident: { personal_data_affected: false, resolution_summary: 'x', anpd_notification_status: 'not_required' },
  updateAuditConfigOrgScoped: { hot_window_days: 1 },
  updateWebhookEndpoint: { name: 'stranger' },
  bankConsentCallback: { auth_code: 'c' },
  bankConsentCallbackLegacy: { auth_code: 'c' },
  openPixPartnerAccount: { document: '529.982.247-25' },
  registerPixKey: { key_type: 'EVP' },
  startPixContactVerification: { channel: 'email', endpoint: 'a@example.com' },
  confirmPixContactVerification: { code: '123456' },
  createPixCharge: { amount_minor: 1 },
  createPixDevolution: { amount_minor: 1 },
  updatePolicy: { enabled: false },
  decideApproval: { decision: 'deny' },
  updateConnectionMetadata: { connection_metadata: { a: 1 } },
  submitSignupVerification: { code: '123456' },
  setCounterpartyPreferences: { preferences: { stranger: true } },
  patchMcpServer: { active: false },
  patchMcpTool: { active: false },
  executeSessionTool: { tool: 'clima/get_forecast', input: { city: 'x' } },
  sendSessionMessage: { message: 'hello' },
  proxyExecuteSession: { server: 'clima', endpoint: '/forecast', method: 'GET' },
  sessionMcpPost: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
  transferBetweenWalletSlots: { from_currency: 'BRL', to_currency: 'USDC', amount_minor: '100' },
};

const fill = (url: string, ids: Record<string, string>) => url.replace(/:([A-Za-z_]+)/g, (_, k: string) => encodeURIComponent(ids[k]!));
const strip = (body: unknown) => {
  if (body && typeof body === 'object' && 'request_id' in body) {
    const { request_id: _r, ...rest } = body as Record<string, unknown>;
    return rest;
  }
  return body;
};

// Open routes (DID documents) are public by design; audit sequence numbers and
// tile coordinates are numbered per organization, so a number names the
// caller's own entry or tile.
// The provider catalog is global (its slugs name no tenant's resource), also as servers and tools.
const catalog = ['/v1/providers/', '/v1/servers/', '/v1/tools/'];
const withIds = app.routeSpecs.filter((r) => r.url.includes(':') && r.auth !== 'open' && !r.url.includes(':sequence_number') && !r.url.includes('/tile/:level') && !catalog.some((c) => r.url.startsWith(c)));
t.ok(withIds.length >= 8, 'the routes with ids are all covered');

for (const route of withIds) {
  t.test(`${route.method} ${route.url}`, async (t) => {
    const real = realIds(route.url);
    const headers = route.auth === 'api_key' ? (route.url.startsWith('/v1/mcp-servers') ? { ...b.key, 'x-svc-user': b.ownerId } : b.key) : b.owner;
    const payload = sampleBody[route.operationId];
    const send = (ids: Record<string, string>) => app.inject({ method: route.method, url: fill(route.url, ids), headers, ...(payload ? { payload } : {}) });
    const foreign = await send(real);
    const absent = await send(absentIds(real));
    t.equal(foreign.statusCode, absent.statusCode, 'same status as an absent id');
    t.same(strip(foreign.json()), strip(absent.json()), 'same body as an absent id');
    // 404 for another organization's resource; 403 for another organization named in an /v1/orgs/{orgId} path.
    t.ok(foreign.statusCode === (route.url.startsWith('/v1/orgs/') ? 403 : 404), `answers ${foreign.statusCode}`);
  });
}

t.test("another organization's or project's hosted connect session id answers as an absent one", async (t) => {
  const third = (await app.inject({ method: 'POST', url: '/v1/projects', headers: a.key, payload: { name: 'Hosted elsewhere', slug: 'hosted-elsewhere' } })).json();
  for (const [who, headers] of [['another organization', b.key], ['another project', { ...a.key, 'x-svc-project': third.id }]] as const) {
    for (const merchant of ['merchant-a', 'merchant-b']) {
      const send = (sessionId: string) => app.inject({ method: 'POST', url: `/v1/cart/${merchant}/connect/finish`, headers, payload: { session_id: sessionId } });
      const foreign = await send(aHosted);
      const absent = await send('hcs_absentAbsentAbsentAbsent00');
      t.equal(foreign.statusCode, 404, `${who}, ${merchant}`);
      t.same(strip(foreign.json()), strip(absent.json()), `${who}, ${merchant}: same body as an absent id`);
    }
  }
  const own = await app.inject({ method: 'POST', url: '/v1/cart/merchant-a/connect/finish', headers: a.key, payload: { session_id: aHosted } });
  t.equal(own.json().error.code, 'session_expired', 'its own project reaches it (no browser holds it here: expired)');
});

t.test("A's resources are untouched by B's attempts", async (t) => {
  const p = await app.inject({ method: 'GET', url: `/v1/projects/${a.projectId}`, headers: a.key });
  t.equal(p.statusCode, 200);
  t.equal(p.json().name, 'Default');
  t.equal((await app.inject({ method: 'GET', url: '/v1/whoami', headers: a.key })).statusCode, 200, "A's key still works");
});

t.test("another project's mandate and card answer as absent ones; the organization's consumer is visible", async (t) => {
  const second = (await app.inject({ method: 'POST', url: '/v1/projects', headers: a.key, payload: { name: 'Second', slug: 'second' } })).json();
  const headers = { ...a.key, 'x-svc-project': second.id };
  for (const [url, absent] of [
    [`/v1/mandates/${aMandate.id}`, '/v1/mandates/mdt_absentAbsent0000'],
    [`/v1/consumers/mandates/${aMandate.id}/card`, '/v1/consumers/mandates/mdt_absentAbsent0000/card'],
  ] as const) {
    const foreign = await app.inject({ method: 'GET', url, headers });
    const missing = await app.inject({ method: 'GET', url: absent, headers });
    t.equal(foreign.statusCode, 404, url);
    t.same(strip(foreign.json()), strip(missing.json()));
  }
  const spend = await app.inject({ method: 'POST', url: `/v1/consumers/mandates/${aMandate.id}/spend`, headers, payload: { amount_minor: '1', currency: 'BRL', merchant: 'm' } });
  t.equal(spend.json().error.code, 'mandate_not_found');
  t.equal((await app.inject({ method: 'GET', url: `/v1/mandates/${aMandate.id}`, headers: a.key })).statusCode, 200, 'its own project still sees it');
  // A consumer is the organization's (docs/decisions.md, "A consumer across projects"):
  // every project reads it; the records hanging off it stay with their project.
  const consumer = await app.inject({ method: 'GET', url: `/v1/consumers/${aConsumer.id}`, headers });
  t.equal(consumer.statusCode, 200, 'the second project reads the consumer');
  t.match(consumer.json(), { id: aConsumer.id, mandate_ids: [], card_ids: [] }, "without the first project's mandate and card ids");
  t.match((await app.inject({ method: 'GET', url: `/v1/consumers/${aConsumer.id}`, headers: a.key })).json(), { mandate_ids: [aMandate.id], card_ids: [aCard.card_id] }, 'its own project sees them');
  t.same((await app.inject({ method: 'GET', url: `/v1/consumers/${aConsumer.id}/wallet`, headers })).json(), { consumer_id: aConsumer.id, currencies: [] }, "the wallet counts the calling project's mandates only");
  t.ok((await app.inject({ method: 'GET', url: '/v1/consumers', headers })).json().consumers.some((c: { id: string }) => c.id === aConsumer.id), 'and lists it');
  t.equal((await app.inject({ method: 'GET', url: `/v1/consumers/${aConsumer.id}`, headers: b.key })).statusCode, 404, 'another organization still does not');
});
