import t from 'tap';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { bootstrapOrg, secondInstance, testApp } from '../helpers/app.ts';
import { signedExecution } from '../helpers/x402.ts';

// Tool calls and x402 executions decide on this process's copy of the
// policies and write their last record before the outside effect (the
// `tool_call.started`, the verified x402 row) under the policy stream's
// revision. Two instances on one database: a rule acknowledged through one
// binds the next call through the other, whose copy predates it; a rule
// removed through one stops binding the other. Nothing is recorded or moved
// for a refused call, and the x402 nonce stays usable.

const a = await testApp(t, { providers: true, x402: true });
const appB = await secondInstance(t, a, { app: { vault: a.vault, providers: a.providerRuntime, x402: a.x402!, webhookTargets: { loopback: true, private: false } } });
const apps = [a.app, appB];

const org = await bootstrapOrg(a.app, 'GuardedCalls');
const post = (i: number, url: string, payload: Record<string, unknown>) => apps[i]!.inject({ method: 'POST', url, headers: org.key, payload });
const remove = (i: number, id: string) => apps[i]!.inject({ method: 'DELETE', url: `/v1/policies/${id}`, headers: org.key });

t.test('tool calls: a rule acknowledged through one instance binds the next call through the other', async (t) => {
  const connected = await post(1, '/v1/connections', { server_id: 'acme-payments', secret: a.sandboxProviders!.issueCredential('acme-payments') });
  t.equal(connected.statusCode, 201, connected.body);
  const session = (await post(1, '/v1/sessions', { servers: ['acme-payments'], user_id: 'alice' })).json();
  const charge = (i: number) => post(i, `/v1/sessions/${session.id}/execute`, { tool: 'acme-payments/create_charge', input: { amount_minor: 100, currency: 'BRL', description: 'guarded' } });
  const calls = async () => (await apps[1]!.inject({ method: 'GET', url: '/v1/tool-calls?count_only=true', headers: org.key })).json().count as number;
  // Instance 0 folds the policies (none) and keeps its copy.
  t.equal((await charge(0)).statusCode, 200);
  t.equal((await charge(0)).statusCode, 200, 'decided on its copy');
  const deny = await post(1, '/v1/policies', { name: 'no charges', type: 'deny', agents: ['alice'], tools: ['acme-payments/*'] });
  t.equal(deny.statusCode, 201, deny.body);
  const before = await calls();
  const refused = await charge(0);
  t.equal(refused.statusCode, 403, 'the next call through instance 0 is denied');
  t.same(refused.json(), { reason: 'denied_by_policy', ruleType: 'deny', ruleId: deny.json().id });
  t.equal(await calls(), before, 'no tool call recorded for it');
  // Removed through instance 1: instance 0's copy (with the rule) is refused by the guard, and the call evaluated again.
  t.equal((await remove(1, deny.json().id)).statusCode, 204);
  t.equal((await charge(0)).statusCode, 200, 'allowed again through instance 0');
  t.equal(await calls(), before + 1);
});

t.test('x402: a rule acknowledged through one instance binds the next execution through the other; nothing moves, the nonce stays usable', async (t) => {
  const payer = privateKeyToAccount(generatePrivateKey());
  const payee = privateKeyToAccount(generatePrivateKey()).address;
  t.equal((await post(0, '/v1/test/x402/faucet', { address: payer.address, value_atomic: '50000000' })).statusCode, 200);
  const balance = () => a.x402!.test!.settlement.balanceOf(payee as Hex);
  const execution = (value: bigint) => signedExecution(payer, payee, value, { resource: 'https://api.example.com/guarded' });
  const execute = async (i: number, body: Record<string, unknown>) => post(i, '/v1/facilitator/x402/executions', body);
  t.equal((await execute(0, await execution(10_000n))).statusCode, 200, 'instance 0 folds the policies (none)');
  const deny = await post(1, '/v1/policies', { name: 'no x402 for this payer', type: 'deny', agents: [payer.address], tools: ['x402.*'] });
  t.equal(deny.statusCode, 201, deny.body);
  const body = await execution(20_000n);
  const before = await balance();
  const refused = await execute(0, body);
  t.equal(refused.statusCode, 403, 'the next execution through instance 0 is denied');
  t.same(refused.json(), { reason: 'denied_by_policy', ruleType: 'deny', ruleId: deny.json().id });
  t.equal(await balance(), before, 'no money moved');
  // Removed through instance 1: instance 0's copy (with the rule) is refused by the guard, evaluated again, and the same nonce settles.
  t.equal((await remove(1, deny.json().id)).statusCode, 204);
  const again = await execute(0, body);
  t.equal(again.statusCode, 200, again.body);
  t.equal((await balance()) - before, 20_000n, 'settled once');
});

t.test('x402: the guard refuses the verified row when the policies moved after this copy; claim and reservation are released', async (t) => {
  const payer = privateKeyToAccount(generatePrivateKey());
  const payee = privateKeyToAccount(generatePrivateKey()).address;
  t.equal((await post(1, '/v1/test/x402/faucet', { address: payer.address, value_atomic: '50000000' })).statusCode, 200);
  const sign = () => signedExecution(payer, payee, 5_000n, { resource: 'https://api.example.com/moved', max_amount_minor: '100', total_cap_minor: '100000' });
  t.equal((await post(1, '/v1/facilitator/x402/executions', await sign())).statusCode, 200, 'instance 1 folds the policies');
  // A rule that does not concern this payer moves the policy stream through instance 0.
  const other = await post(0, '/v1/policies', { name: 'someone else', type: 'deny', agents: ['0x0000000000000000000000000000000000000001'], tools: ['x402.*'] });
  t.equal(other.statusCode, 201, other.body);
  const body = await sign();
  const r = await post(1, '/v1/facilitator/x402/executions', body);
  t.equal(r.statusCode, 200, 'decided again on a fresh read, and settled');
  const fauth = r.json().foreign_authorization_id as string;
  // The first try's claim and reservation were released before the second try claimed the nonce.
  const log = await a.ledger.store.readAll({ maxCount: 10_000 });
  const claimedByPayer = new Set(log.filter((e) => e.type === 'x402.nonce_claimed' && (e.data as { signer: string }).signer.toLowerCase() === payer.address.toLowerCase()).map((e) => (e.data as { foreign_authorization_id: string }).foreign_authorization_id));
  const released = log.filter((e) => e.type === 'x402.nonce_released' && claimedByPayer.has((e.data as { foreign_authorization_id: string }).foreign_authorization_id));
  t.equal((released[0]?.data as { reason: string } | undefined)?.reason, 'policies_changed');
  t.equal(released.length, 1, 'one claim released for the moved policies');
  const first = (released[0]!.data as { foreign_authorization_id: string }).foreign_authorization_id;
  t.not(first, fauth);
  t.ok(log.some((e) => e.type === 'x402.amount_released' && (e.data as { foreign_authorization_id: string }).foreign_authorization_id === first), 'its reservation released');
  t.notOk(log.some((e) => e.type === 'x402.authorization_verified' && (e.data as { foreign_authorization_id: string }).foreign_authorization_id === first), 'no row for it');
  await remove(0, other.json().id);
});
