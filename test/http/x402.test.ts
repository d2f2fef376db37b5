import { randomBytes } from 'node:crypto';
import * as ed from '@noble/ed25519';
import canonicalize from 'canonicalize';
import t from 'tap';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from '../../src/adapters/chain/signature.ts';
import { BASE_SEPOLIA_CHAIN_ID, BASE_SEPOLIA_USDC } from '../../src/adapters/chain/local-chain.ts';
import '../../src/audit/note.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';

// The facilitator over a real local EVM: every refusal with a real signature,
// settlement that moves balances, replay, caps under concurrency, receipts.

const { app, ledger, x402 } = await testApp(t, { x402: true });
const org = await bootstrapOrg(app, 'Facilitated');
const payer = privateKeyToAccount(generatePrivateKey());
const payee = privateKeyToAccount(generatePrivateKey()).address;
const post = (url: string, payload: Record<string, unknown>, headers: Record<string, string> = org.key) => app.inject({ method: 'POST', url, headers, payload });

const faucet = await post('/v1/test/x402/faucet', { address: payer.address, value_atomic: '50000000' });
const types = TRANSFER_WITH_AUTHORIZATION_TYPES;

async function execution(o: { value?: bigint; domainName?: string; to?: `0x${string}`; validAfter?: bigint; validBefore?: bigint; resource?: string; max?: string; total?: string } = {}) {
  const now = BigInt(Math.floor(Date.now() / 1000));
  const message = { from: payer.address, to: o.to ?? payee, value: o.value ?? 10_000n, validAfter: o.validAfter ?? now - 60n, validBefore: o.validBefore ?? now + 600n, nonce: `0x${randomBytes(32).toString('hex')}` as Hex };
  const domain = { name: o.domainName ?? 'USDC', version: '2', chainId: BASE_SEPOLIA_CHAIN_ID, verifyingContract: BASE_SEPOLIA_USDC as Hex };
  const signature = await payer.signTypedData({ domain, types, primaryType: 'TransferWithAuthorization', message });
  return {
    authorization: { ...message, value: message.value.toString(), validAfter: message.validAfter.toString(), validBefore: message.validBefore.toString() },
    domain,
    signature,
    intent: { payee: o.to ?? payee, resource: o.resource ?? 'https://api.example.com/report', seller: 'example', purpose: 'report', max_amount_minor: o.max ?? '500', total_cap_minor: o.total ?? '100000', resource_url: 'https://api.example.com/report' },
  };
}
const balance = (a: string) => x402!.test!.settlement.balanceOf(a as Hex);

t.test('faucet', async (t) => {
  t.equal(faucet.statusCode, 200);
  t.match(faucet.json(), { address: payer.address, value_atomic: '50000000', tx_hash: /^0x[0-9a-f]{64}$/, balance_atomic: '50000000' });
  t.same([(await post('/v1/test/x402/faucet', { address: payer.address, value_atomic: '1' }, { authorization: `Bearer ${org.liveKey}` })).json().error.code], ['sandbox_funding_not_permitted']);
});

t.test('an execution moves exactly its value and is sealed with a signed receipt', async (t) => {
  const before = await balance(payee);
  const body = await execution({ value: 1_234_567n });
  const r = await post('/v1/facilitator/x402/executions', body);
  t.equal(r.statusCode, 200, r.body);
  const b = r.json();
  t.match(b, { status: 'executed', foreign_authorization_id: /^fauth_/, mandate_id: /^x402mdt_/, execution_id: /^x402exec_/, signer: payer.address, settlement: { tx_hash: /^0x/, network: 'base-sepolia', money_moved: true }, receipt: { id: /^rcpt_/ } });
  t.equal((await balance(payee)) - before, 1_234_567n, 'the payee gained exactly value');
  const row = (await app.inject({ method: 'GET', url: `/v1/facilitator/x402/executions/${b.foreign_authorization_id}`, headers: org.key })).json();
  t.match(row, { kind: 'x402', status: 'executed', payee, value_atomic: '1234567', amount_minor: 124, network: 'base-sepolia', chain_id: 84532, settlement_tx: b.settlement.tx_hash });
  // The receipt verifies against the published JWKS.
  const jwks = (await app.inject({ method: 'GET', url: '/.well-known/receipt-keys.json' })).json();
  const events = await ledger.store.readStream(`fauth-${b.foreign_authorization_id}`);
  const receipt = events.find((e) => e.type === 'x402.executed')!.data.receipt as Record<string, unknown>;
  const { signature, alg: _a, kid, ...signed } = receipt;
  const key = jwks.keys.find((k: { kid: string }) => k.kid === kid);
  t.ok(ed.verify(Buffer.from(String(signature), 'base64url'), Buffer.from(canonicalize(signed)!, 'utf8'), Buffer.from(key.x, 'base64url')), 'receipt signature verifies');
  const types_ = events.map((e) => e.type);
  t.same(types_, ['x402.authorization_verified', 'x402.executed']);
  // The same authorization twice: 409 with the first id, one transfer.
  const again = await post('/v1/facilitator/x402/executions', body);
  t.equal(again.statusCode, 409);
  t.match(again.json().error, { code: 'authorization_already_used', details: { foreign_authorization_id: b.foreign_authorization_id } });
  t.equal((await balance(payee)) - before, 1_234_567n, 'still one transfer');
});

t.test('each refusal, in order, writing no row', async (t) => {
  const head = await ledger.store.headPosition();
  const ok = await execution();
  const cases: [Record<string, unknown>, number, string][] = [
    [{ ...ok, authorization: { ...ok.authorization, value: '' } }, 400, 'invalid_payload'],
    [{ ...ok, authorization: { ...ok.authorization, value: '0x10' } }, 400, 'invalid_payload'],
    [{ ...ok, authorization: { ...ok.authorization, from: ok.authorization.from.toLowerCase() } }, 400, 'malformed_authorization'],
    [{ ...ok, authorization: { ...ok.authorization, nonce: '0x1234' } }, 400, 'malformed_authorization'],
    [{ ...ok, domain: { ...ok.domain, chainId: 8453 } }, 400, 'network_mismatch'],
    [{ ...ok, signature: '0x1234' }, 401, 'bad_signature'],
    [await execution({ domainName: 'USD Coin' }), 401, 'signer_mismatch'],
    [await execution({ validAfter: BigInt(Math.floor(Date.now() / 1000) + 3600) }), 422, 'authorization_not_yet_valid'],
    [await execution({ validBefore: BigInt(Math.floor(Date.now() / 1000) + 2) }), 422, 'authorization_expired'],
    [{ ...ok, intent: { ...ok.intent, payee: privateKeyToAccount(generatePrivateKey()).address } }, 422, 'payee_authorization_mismatch'],
    [await execution({ value: 6_000_000n, resource: 'https://api.example.com/pertx' }), 422, 'per_tx_cap_exceeded'],
  ];
  const { signature: _s, ...noSig } = ok;
  cases.unshift([noSig, 400, 'missing_required_field']);
  for (const [body, status, code] of cases) {
    const r = await post('/v1/facilitator/x402/executions', body);
    t.same([r.statusCode, r.json().error?.code], [status, code], code);
  }
  const rows = (await ledger.store.readAll({ after: head, maxCount: 10_000 })).filter((e) => e.type === 'x402.authorization_verified');
  t.same(rows, [], 'no row for any refusal');
  // High-s twin of a valid signature.
  const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
  const sig = ok.signature;
  const high = `${sig.slice(0, 66)}${(n - BigInt(`0x${sig.slice(66, 130)}`)).toString(16).padStart(64, '0')}${parseInt(sig.slice(130), 16) === 27 ? '1c' : '1b'}`;
  t.equal((await post('/v1/facilitator/x402/executions', { ...ok, signature: high })).json().error.code, 'bad_signature');
  t.equal((await post('/v1/facilitator/x402/executions', ok)).statusCode, 200, 'the refused-before-claim authorization still executes');
});

t.test('20 concurrent executions under one intent whose total cap allows 10: exactly 10 executed', async (t) => {
  const before = await balance(payee);
  const bodies = await Promise.all(Array.from({ length: 20 }, () => execution({ value: 100_000n, resource: 'https://api.example.com/capped', max: '10', total: '100' })));
  const results = await Promise.all(bodies.map((b) => post('/v1/facilitator/x402/executions', b)));
  const ok = results.filter((r) => r.statusCode === 200);
  const capped = results.filter((r) => r.statusCode === 422 && r.json().error.code === 'total_cap_exceeded');
  t.equal(ok.length, 10, JSON.stringify(results.filter((r) => r.statusCode !== 200 && r.statusCode !== 422).map((r) => r.body.slice(0, 300))));
  t.equal(capped.length, 10);
  t.equal((await balance(payee)) - before, 10n * 100_000n, 'the chain shows exactly 10 transfers');
});

t.test('a live credential without mainnet enabled: 501 before any work', async (t) => {
  const r = await post('/v1/facilitator/x402/executions', {}, { authorization: `Bearer ${org.liveKey}` });
  t.same([r.statusCode, r.json().error.code], [501, 'mainnet_not_enabled']);
  t.equal((await app.inject({ method: 'GET', url: '/v1/facilitator/x402/executions/fauth_nope', headers: org.key })).statusCode, 404);
});

t.test('an independent client: a payload made by the x402 reference packages is accepted and settles', async (t) => {
  const { ExactEvmScheme } = await import('@x402/evm/exact/client');
  const scheme = new ExactEvmScheme(payer as never);
  const requirements = { scheme: 'exact', network: `eip155:${BASE_SEPOLIA_CHAIN_ID}`, asset: BASE_SEPOLIA_USDC, amount: '250000', payTo: payee, maxTimeoutSeconds: 300, extra: { name: 'USDC', version: '2' } };
  const created = (await scheme.createPaymentPayload(2, requirements as never)) as unknown as { payload: { authorization: Record<string, string>; signature: string } };
  const { authorization, signature } = created.payload;
  const before = { payer: await balance(payer.address), payee: await balance(payee) };
  const r = await post('/v1/facilitator/x402/executions', {
    authorization,
    domain: { name: 'USDC', version: '2', chainId: BASE_SEPOLIA_CHAIN_ID, verifyingContract: BASE_SEPOLIA_USDC },
    signature,
    intent: { payee, resource: 'https://api.example.com/client', max_amount_minor: '100', total_cap_minor: '1000' },
  });
  t.equal(r.statusCode, 200, r.body);
  t.equal(before.payer - (await balance(payer.address)), 250_000n, "the payer's balance fell by exactly value");
  t.equal((await balance(payee)) - before.payee, 250_000n, "the payee's rose by exactly value");
});

t.test('settlement failures tell the truth: nothing moved is rejected; an unknown outcome is settled later from the receipt', async (t) => {
  const { EvmSettlement } = await import('../../src/adapters/chain/settlement.ts');
  const { X402SettlementReactor } = await import('../../src/reactors/x402-settlement.ts');
  const net = x402!.test!;
  const row = async (id: string) => (await app.inject({ method: 'GET', url: `/v1/facilitator/x402/executions/${id}`, headers: org.key })).json();

  // A payer without funds: the transfer cannot be sent.
  const poor = privateKeyToAccount(generatePrivateKey());
  const now = BigInt(Math.floor(Date.now() / 1000));
  const message = { from: poor.address, to: payee, value: 5n, validAfter: now - 60n, validBefore: now + 600n, nonce: `0x${randomBytes(32).toString('hex')}` as Hex };
  const domain = { name: 'USDC', version: '2', chainId: BASE_SEPOLIA_CHAIN_ID, verifyingContract: BASE_SEPOLIA_USDC as Hex };
  const sig = await poor.signTypedData({ domain, types, primaryType: 'TransferWithAuthorization', message });
  const broke = await post('/v1/facilitator/x402/executions', {
    authorization: { ...message, value: '5', validAfter: message.validAfter.toString(), validBefore: message.validBefore.toString() },
    domain,
    signature: sig,
    intent: { payee, resource: 'https://api.example.com/broke', max_amount_minor: '1', total_cap_minor: '1' },
  });
  t.same([broke.statusCode, broke.json().error.code, broke.json().error.details.money_moved], [502, 'settlement_failed', false]);
  t.match(await row(broke.json().error.details.foreign_authorization_id), { status: 'rejected', reject_code: 'settlement_failed' });

  // An authorization already used on chain (settled behind our back): the token refuses it.
  const body = await execution({ value: 7n, resource: 'https://api.example.com/reused' });
  const au = body.authorization;
  await net.settlement.settle({ from: au.from, to: au.to, nonce: au.nonce, value: 7n, validAfter: BigInt(au.validAfter), validBefore: BigInt(au.validBefore) }, body.signature as Hex);
  const reused = await post('/v1/facilitator/x402/executions', body);
  t.same([reused.statusCode, reused.json().error.code], [502, 'settlement_failed']);

  // A chain that is down.
  const original = net.settlement;
  net.settlement = new EvmSettlement({ rpcUrl: 'http://127.0.0.1:9', chainId: BASE_SEPOLIA_CHAIN_ID, token: BASE_SEPOLIA_USDC, facilitatorKey: '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80', receiptTimeoutMs: 500 });
  const down = await post('/v1/facilitator/x402/executions', await execution({ value: 3n, resource: 'https://api.example.com/down' }));
  t.same([down.statusCode, down.json().error.code], [502, 'settlement_failed']);

  // A broadcast whose receipt does not arrive in time: 502 with the tx hash, the row stays open,
  // and the reactor settles it from the receipt; money that moved is recorded as moved.
  const chainUrl = (original as unknown as { cfg: { rpcUrl: string } }).cfg.rpcUrl;
  net.settlement = new EvmSettlement({ rpcUrl: chainUrl, chainId: BASE_SEPOLIA_CHAIN_ID, token: BASE_SEPOLIA_USDC, facilitatorKey: '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80', receiptTimeoutMs: 1 });
  const before = await original.balanceOf(payee);
  const pending = await post('/v1/facilitator/x402/executions', await execution({ value: 11n, resource: 'https://api.example.com/unknown' }));
  net.settlement = original;
  if (pending.statusCode === 502) {
    t.match(pending.json().error, { code: 'settlement_outcome_unknown', details: { tx_hash: /^0x/, outcome: 'unknown' } });
    const id = pending.json().error.details.foreign_authorization_id;
    t.equal((await row(id)).status, 'verified', 'not final while unknown');
    const reactor = new X402SettlementReactor(ledger.db, ledger.store, x402!);
    await ledger.settle();
    t.equal(await reactor.tick(), 1);
    await ledger.settle();
    t.match(await row(id), { status: 'executed', execution_id: /^x402exec_/ });
  } else {
    t.equal(pending.statusCode, 200, 'the receipt arrived within even 1 ms: executed');
  }
  t.equal((await original.balanceOf(payee)) - before, 11n, 'the money moved, and is recorded as moved');
});

t.test('mainnet, when enabled, holds each execution to the operator ceiling', async (t) => {
  const BASE_USDC = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
  x402!.live = { ...x402!.test!, name: 'base', chainId: 8453, token: BASE_USDC, domainName: 'USD Coin', domainVersion: '2' };
  t.teardown(() => {
    x402!.live = undefined;
  });
  const now = BigInt(Math.floor(Date.now() / 1000));
  const message = { from: payer.address, to: payee, value: 150_000_000n, validAfter: now - 60n, validBefore: now + 600n, nonce: `0x${randomBytes(32).toString('hex')}` as Hex };
  const domain = { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: BASE_USDC as Hex };
  const signature = await payer.signTypedData({ domain, types, primaryType: 'TransferWithAuthorization', message });
  const r = await post(
    '/v1/facilitator/x402/executions',
    {
      authorization: { ...message, value: message.value.toString(), validAfter: message.validAfter.toString(), validBefore: message.validBefore.toString() },
      domain,
      signature,
      intent: { payee, resource: 'https://api.example.com/mainnet', max_amount_minor: '100000', total_cap_minor: '1000000' },
    },
    { authorization: `Bearer ${org.liveKey}` },
  );
  t.same([r.statusCode, r.json().error.code], [422, 'x402_mainnet_cap_exceeded'], '$150 over a $100 ceiling');
  const test = await post('/v1/facilitator/x402/executions', { authorization: { ...message, value: message.value.toString(), validAfter: message.validAfter.toString(), validBefore: message.validBefore.toString() }, domain, signature, intent: { payee, resource: 'x', max_amount_minor: '1', total_cap_minor: '1' } });
  t.same([test.statusCode, test.json().error.code], [400, 'network_mismatch'], 'a test key cannot settle on base');
});
