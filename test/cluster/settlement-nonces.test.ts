import { randomBytes } from 'node:crypto';
import t from 'tap';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from '../../src/adapters/chain/signature.ts';
import { BASE_SEPOLIA_CHAIN_ID, BASE_SEPOLIA_USDC, SANDBOX_FACILITATOR_KEY, startLocalChain } from '../../src/adapters/chain/local-chain.ts';
import { EvmSettlement } from '../../src/adapters/chain/settlement.ts';
import { postgresNonceGate } from '../../src/adapters/chain/nonces.ts';
import { openDb } from '../../src/postgres/db.ts';
import { testDatabase } from '../helpers/db.ts';

// Two instances settle for one facilitator key on one chain: each its own
// EvmSettlement and pool on the shared database, as two processes. The nonce
// gate (src/adapters/chain/nonces.ts) makes them one sender: 80 concurrent
// settlements through both all settle, none "nonce too low".

const chain = await startLocalChain();
t.teardown(() => chain.stop());
const { url, db } = await testDatabase(t);
const dbB = openDb(url, { max: 4 });
t.teardown(() => dbB.close());
const instances = [db, dbB].map((pool) => new EvmSettlement({ rpcUrl: chain.rpcUrl, chainId: BASE_SEPOLIA_CHAIN_ID, token: BASE_SEPOLIA_USDC, facilitatorKey: SANDBOX_FACILITATOR_KEY, receiptTimeoutMs: 30_000, nonces: postgresNonceGate(pool) }));
const payer = privateKeyToAccount(generatePrivateKey());
const payee = privateKeyToAccount(generatePrivateKey()).address;

async function authorize(value: bigint) {
  const now = BigInt(Math.floor(Date.now() / 1000));
  const message = { from: payer.address, to: payee, value, validAfter: now - 60n, validBefore: now + 3600n, nonce: `0x${randomBytes(32).toString('hex')}` as Hex };
  const signature = await payer.signTypedData({ domain: { name: 'USDC', version: '2', chainId: BASE_SEPOLIA_CHAIN_ID, verifyingContract: BASE_SEPOLIA_USDC }, types: TRANSFER_WITH_AUTHORIZATION_TYPES, primaryType: 'TransferWithAuthorization', message });
  return { message, signature };
}

t.test('80 concurrent settlements through two instances on one facilitator key all settle', async (t) => {
  await instances[0]!.mint(payer.address, 1_000_000n);
  const auths = await Promise.all(Array.from({ length: 80 }, () => authorize(1_000n)));
  const results = await Promise.all(auths.map((a, i) => instances[i % 2]!.settle(a.message, a.signature)));
  const failed = results.filter((r) => r.outcome !== 'settled').map((r) => (r as { reason?: string }).reason ?? r.outcome);
  t.same(failed, [], 'every settlement settled');
  t.equal(await instances[1]!.balanceOf(payee), 80_000n, 'each moved its value once');
  const hashes = new Set(results.map((r) => ('txHash' in r ? r.txHash : '')));
  t.equal(hashes.size, 80, 'eighty transactions');
});
