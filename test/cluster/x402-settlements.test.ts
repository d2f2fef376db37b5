import t from 'tap';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { bootstrapOrg } from '../helpers/app.ts';
import { call, testCluster } from '../helpers/cluster.ts';
import { fundedPayer, signedExecution } from '../helpers/x402.ts';

// x402 executions through two instances on one facilitator key: each instance
// settles through its own adapter, and the nonce gate in the shared database
// (src/adapters/chain/nonces.ts) makes them one sender for the account, so 80
// concurrent executions through the balancer all settle on chain.

const c = await testCluster(t, { x402: true });
const org = await bootstrapOrg(c.apps[0]!, 'Facilitated');

t.test('80 concurrent x402 executions through both instances on one facilitator key all settle', async (t) => {
  const payer = await fundedPayer(c.apps[0]!, org);
  const bodies = await Promise.all(Array.from({ length: 80 }, () => signedExecution(payer, privateKeyToAccount(generatePrivateKey()).address, 1_000n)));
  const answers = await Promise.all(bodies.map((b) => call(c.balancer.url, 'POST', '/v1/facilitator/x402/executions', org.key, b)));
  const failed = answers.filter((a) => a.status !== 200 || a.body.status !== 'executed' || a.body.settlement?.money_moved !== true).map((a) => `${a.status} ${JSON.stringify(a.body).slice(0, 200)}`);
  t.same(failed, [], 'every execution executed with money moved');
  t.equal(new Set(answers.map((a) => a.body.settlement?.tx_hash)).size, 80, 'eighty transactions');
  t.ok(c.balancer.sent[0]! >= 20 && c.balancer.sent[1]! >= 20, `both instances settled (${c.balancer.sent.join(' / ')})`);
});
