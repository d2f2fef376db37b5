import { randomBytes } from 'node:crypto';
import t from 'tap';
import { type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from '../../src/adapters/chain/signature.ts';
import { BASE_SEPOLIA_CHAIN_ID, BASE_SEPOLIA_USDC, SANDBOX_FACILITATOR_KEY, startLocalChain } from '../../src/adapters/chain/local-chain.ts';
import { EvmSettlement } from '../../src/adapters/chain/settlement.ts';

// Settlement against a real local EVM (anvil from npm) with the EIP-3009 test
// token at the Base Sepolia USDC address and its real domain ("USDC", "2").

const chain = await startLocalChain();
t.teardown(() => chain.stop());
const settlement = new EvmSettlement({ rpcUrl: chain.rpcUrl, chainId: BASE_SEPOLIA_CHAIN_ID, token: BASE_SEPOLIA_USDC, facilitatorKey: SANDBOX_FACILITATOR_KEY, receiptTimeoutMs: 10_000 });
const payer = privateKeyToAccount(generatePrivateKey());
const payee = privateKeyToAccount(generatePrivateKey()).address;

const types = TRANSFER_WITH_AUTHORIZATION_TYPES;

async function authorize(value: bigint, domainName = 'USDC') {
  const now = BigInt(Math.floor(Date.now() / 1000));
  const message = { from: payer.address, to: payee, value, validAfter: now - 60n, validBefore: now + 600n, nonce: `0x${randomBytes(32).toString('hex')}` as Hex };
  const signature = await payer.signTypedData({ domain: { name: domainName, version: '2', chainId: BASE_SEPOLIA_CHAIN_ID, verifyingContract: BASE_SEPOLIA_USDC }, types, primaryType: 'TransferWithAuthorization', message });
  return { message, signature };
}

t.test('a signed authorization moves exactly its value, once', async (t) => {
  await settlement.mint(payer.address, 5_000_000n);
  t.equal(await settlement.balanceOf(payer.address), 5_000_000n);
  const { message, signature } = await authorize(1_250_000n);
  const r = await settlement.settle(message, signature);
  t.equal(r.outcome, 'settled');
  t.equal(await settlement.balanceOf(payer.address), 3_750_000n);
  t.equal(await settlement.balanceOf(payee), 1_250_000n);
  t.ok(await settlement.authorizationUsed(payer.address, message.nonce));
  const again = await settlement.settle(message, signature);
  t.equal(again.outcome, 'not_sent', 'a used nonce is refused by the token; nothing moves');
  t.equal(await settlement.balanceOf(payee), 1_250_000n);
});

t.test('a wrong domain recovers another signer and moves nothing; a high-s signature is refused', async (t) => {
  const wrong = await authorize(1n, 'USD Coin');
  t.equal((await settlement.settle(wrong.message, wrong.signature)).outcome, 'not_sent');
  const ok = await authorize(1n);
  const sig = ok.signature;
  // Flip s to n - s (and v) to make the high-s twin of a valid signature.
  const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
  const r = sig.slice(0, 66);
  const s = BigInt(`0x${sig.slice(66, 130)}`);
  const v = parseInt(sig.slice(130, 132), 16);
  const high = `${r}${(n - s).toString(16).padStart(64, '0')}${(v === 27 ? 28 : 27).toString(16)}` as Hex;
  t.equal((await settlement.settle(ok.message, high)).outcome, 'not_sent');
  t.equal((await settlement.settle(ok.message, sig)).outcome, 'settled', 'the low-s original still settles');
});

t.test('a chain that is down: nothing sent', async (t) => {
  const dead = new EvmSettlement({ rpcUrl: 'http://127.0.0.1:9', chainId: BASE_SEPOLIA_CHAIN_ID, token: BASE_SEPOLIA_USDC, facilitatorKey: SANDBOX_FACILITATOR_KEY, receiptTimeoutMs: 1_000 });
  const { message, signature } = await authorize(1n);
  t.equal((await dead.settle(message, signature)).outcome, 'not_sent');
});
