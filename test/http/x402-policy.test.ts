import t from 'tap';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { signedExecution } from '../helpers/x402.ts';

// Policies before every x402 execution (tool `x402.execute`, the signer as the
// agent, the amount in USDC cents): a denial moves no money and spends no
// nonce; an approval-required rule holds the request, and approving it runs
// the held body once, on the real local chain.

const { app, x402 } = await testApp(t, { x402: true });
const org = await bootstrapOrg(app, 'Guarded');
const payer = privateKeyToAccount(generatePrivateKey());
const payee = privateKeyToAccount(generatePrivateKey()).address;
const post = (url: string, payload: Record<string, unknown>, headers: Record<string, string> = org.key) => app.inject({ method: 'POST', url, headers, payload });
await post('/v1/test/x402/faucet', { address: payer.address, value_atomic: '50000000' });
const balance = (a: string) => x402!.test!.settlement.balanceOf(a as Hex);

const execution = (value: bigint) => signedExecution(payer, payee, value);

t.test('a deny rule on x402.execute: 403 with the rule, nothing moved, the nonce still usable', async (t) => {
  const rule = (await post('/v1/policies', { name: 'no x402 for this payer', type: 'deny', agents: [payer.address], tools: ['x402.*'] })).json();
  const body = await execution(10_000n);
  const before = await balance(payee);
  const r = await post('/v1/facilitator/x402/executions', body);
  t.equal(r.statusCode, 403);
  t.same(r.json(), { reason: 'denied_by_policy', ruleType: 'deny', ruleId: rule.id });
  t.equal(await balance(payee), before, 'no money moved');
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/policies/${rule.id}`, headers: org.key })).statusCode, 204);
  const again = await post('/v1/facilitator/x402/executions', body);
  t.equal(again.statusCode, 200, 'the same authorization settles once the rule is gone');
  t.equal((await balance(payee)) - before, 10_000n);
});

t.test('approval-required: held, approved by a person, settled once', async (t) => {
  const rule = (await post('/v1/policies', { name: 'large payments', type: 'approval-required', tools: ['x402.execute'], config: { min_amount_minor: 100 } })).json();
  const before = await balance(payee);
  const small = await post('/v1/facilitator/x402/executions', await execution(50_000n)); // 5 cents
  t.equal(small.statusCode, 200, 'below the threshold settles');
  const held = await post('/v1/facilitator/x402/executions', await execution(2_000_000n)); // 200 cents
  t.equal(held.statusCode, 403);
  t.match(held.json(), { reason: 'approval_required', ruleType: 'approval-required', ruleId: rule.id, approval_id: /^apr_/ });
  t.equal((await balance(payee)) - before, 50_000n, 'the held payment has not moved');
  const [a, b] = await Promise.all([0, 1].map(() => app.inject({ method: 'POST', url: `/v1/approvals/${held.json().approval_id}/decide`, headers: org.owner, payload: { decision: 'approve' } })));
  t.same([a!.statusCode, b!.statusCode].sort(), [200, 409], 'one approval wins');
  const decided = (a!.statusCode === 200 ? a! : b!).json();
  t.match(decided, { status: 'approved', executed_at: String, execution_result: { status: 'executed', settlement: { money_moved: true } } });
  t.equal((await balance(payee)) - before, 2_050_000n, 'the approved payment moved exactly once');
});
