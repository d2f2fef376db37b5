import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { BASE_SEPOLIA_CHAIN_ID, BASE_SEPOLIA_USDC, SANDBOX_FACILITATOR_KEY, startLocalChain, type LocalChain } from '../../src/adapters/chain/local-chain.ts';
import { type NonceGate, postgresNonceGate } from '../../src/adapters/chain/nonces.ts';
import { EvmSettlement } from '../../src/adapters/chain/settlement.ts';
import type { X402Deps } from '../../src/adapters/chain/x402.ts';
import { sandboxHome } from '../../src/adapters/sandbox-home.ts';
import { generateSigningKey } from '../../src/audit/note.ts';
import { CHAIN_RESET_INCIDENT_KIND, onChainReset } from '../../src/usecases/chain-reset.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { until } from '../helpers/wait.ts';
import { signedExecution } from '../helpers/x402.ts';

// The local chain restarted empty under a running service (its state file
// gone), on the port it had: the facilitator's remembered nonce is now ahead
// of the chain. The nonce gate notices (another genesis, a lower height),
// takes the nonce from the chain again, so the next faucet call settles at
// once instead of waiting for a gap that never fills, and an audit incident
// names the settlement whose transaction the chain no longer holds.

const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ledger-chain-reset-'));
t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
const notes: string[] = [];
const home = sandboxHome(dir, (l) => notes.push(l));
let chain: LocalChain = await startLocalChain({ home });
t.teardown(() => chain.stop());

// The runtime's wiring (src/runtime.ts openX402): the gate reports a reset through onChainReset.
let gate: NonceGate | undefined;
const settlement = new EvmSettlement({ rpcUrl: chain.rpcUrl, chainId: BASE_SEPOLIA_CHAIN_ID, token: BASE_SEPOLIA_USDC, facilitatorKey: SANDBOX_FACILITATOR_KEY, receiptTimeoutMs: 20_000, nonces: (c, a, v, s) => gate!(c, a, v, s) });
const x402: X402Deps = {
  test: { name: 'base-sepolia', chainId: BASE_SEPOLIA_CHAIN_ID, token: BASE_SEPOLIA_USDC, domainName: 'USDC', domainVersion: '2', settlement, adapter: 'local-evm' },
  live: undefined,
  mainnetCeilingMinor: 10_000n,
  receiptKey: generateSigningKey('receipts'),
  receiptKid: 'receipts-test-1',
};
const { app, ledger } = await testApp(t, { app: { x402 } });
gate = postgresNonceGate(ledger.db, { onReset: onChainReset({ db: ledger.db, store: ledger.store, now: () => new Date() }, () => x402, (l) => notes.push(l)) });
const org = await bootstrapOrg(app, 'ChainReset');
const post = (url: string, payload: Record<string, unknown>) => app.inject({ method: 'POST', url, headers: org.key, payload });

t.test('a settlement on the chain, then the chain restarts empty on the same port', async (t) => {
  const payer = privateKeyToAccount(generatePrivateKey());
  const payee = privateKeyToAccount(generatePrivateKey()).address;
  t.equal((await post('/v1/test/x402/faucet', { address: payer.address, value_atomic: '5000000' })).statusCode, 200);
  const executed = await post('/v1/facilitator/x402/executions', await signedExecution(payer, payee, 250_000n));
  t.equal(executed.statusCode, 200, executed.body);
  const { foreign_authorization_id: fauth, settlement: s } = executed.json() as { foreign_authorization_id: string; settlement: { tx_hash: Hex } };
  t.ok(await settlement.holds(s.tx_hash), 'the chain holds the settlement');
  const { rows } = await ledger.db.query<{ n: string }>('SELECT next_nonce::text AS n FROM facilitator_nonces');
  t.equal(rows[0]!.n, '2', 'two transactions sent: the remembered nonce is 2');

  const rpcUrl = chain.rpcUrl;
  await chain.stop();
  await fs.rm(chain.stateFile!, { force: true });
  chain = await startLocalChain({ home });
  t.equal(chain.rpcUrl, rpcUrl, 'the chain answers on the port it had');
  t.notOk(await settlement.holds(s.tx_hash), 'the new chain does not hold the settlement');

  // The next send: the nonce comes from the chain (0), so the faucet answers at once (well inside the 20 s receipt wait).
  const other = privateKeyToAccount(generatePrivateKey());
  const started = Date.now();
  const faucet = await post('/v1/test/x402/faucet', { address: other.address, value_atomic: '1000000' });
  t.equal(faucet.statusCode, 200, faucet.body);
  t.ok(Date.now() - started < 20_000, 'no request waited out the receipt timeout');
  t.equal(await settlement.balanceOf(other.address), 1_000_000n, 'the faucet moved money on the new chain');
  t.equal((await ledger.db.query<{ n: string }>('SELECT next_nonce::text AS n FROM facilitator_nonces')).rows[0]!.n, '1', 'the nonce was resynchronized from the chain');

  // An incident names the settlement the chain lost.
  const incident = await until(async () => {
    const r = await app.inject({ method: 'GET', url: '/v1/audit-events/incidents', headers: org.key });
    return (r.json().incidents as { kind: string; detail: string }[] | undefined)?.find((i) => i.kind === CHAIN_RESET_INCIDENT_KIND);
  }, 'a chain reset incident');
  t.match(incident.detail, fauth, 'the incident names the lost settlement');
  t.match(incident.detail, s.tx_hash, 'and its transaction');
  t.ok(notes.some((l) => /went backwards/.test(l)), 'one line for the operator');

  // A second send after the resync is ordinary: no second incident.
  t.equal((await post('/v1/test/x402/faucet', { address: other.address, value_atomic: '1' })).statusCode, 200);
  const all = (await app.inject({ method: 'GET', url: '/v1/audit-events/incidents', headers: org.key })).json().incidents as { kind: string }[];
  t.equal(all.filter((i) => i.kind === CHAIN_RESET_INCIDENT_KIND).length, 1, 'one incident for one reset');
});

t.test('the chain keeps its state across a clean restart: no reset is seen', async (t) => {
  const payer = privateKeyToAccount(generatePrivateKey());
  t.equal((await post('/v1/test/x402/faucet', { address: payer.address, value_atomic: '700' })).statusCode, 200);
  await chain.stop();
  chain = await startLocalChain({ home });
  t.equal(await settlement.balanceOf(payer.address), 700n, 'the balance survived the restart');
  const before = notes.length;
  t.equal((await post('/v1/test/x402/faucet', { address: payer.address, value_atomic: '300' })).statusCode, 200);
  t.equal(await settlement.balanceOf(payer.address), 1000n);
  t.equal(notes.length, before, 'nothing reported');
});
