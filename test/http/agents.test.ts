import * as ed from '@noble/ed25519';
import t from 'tap';
import '../../src/audit/note.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';

const { app, ledger, vault } = await testApp(t);
const org = await bootstrapOrg(app, 'Agents');
const other = await bootstrapOrg(app, 'Strangers');
const post = (url: string, payload?: Record<string, unknown>, headers: Record<string, string> = org.key) =>
  app.inject({ method: 'POST', url, headers, ...(payload !== undefined ? { payload } : {}) });

const reg = await post('/v1/agents', { agent_id: 'buyer', principal_ref: 'person-42', display_name: 'Buyer bot' });
const buyer = reg.json();

t.test('register', async (t) => {
  t.equal(reg.statusCode, 201);
  t.equal(buyer.agent_did, `did:web:127.0.0.1%3A8080:${org.orgId}:buyer`);
  t.equal(buyer.kid, `${buyer.agent_did}#1`);
  t.equal(buyer.status, 'active');
  t.equal(Buffer.from(buyer.pubkey, 'base64').length, 32, 'raw 32-byte Ed25519 public key');
  const again = await post('/v1/agents', { agent_id: 'buyer', principal_ref: 'x' });
  t.equal(again.statusCode, 409);
  t.equal(again.json().error.code, 'agent_exists');
  for (const bad of ['has space', 'slash/handle', 'colon:handle', 'ümlaut', '%41']) {
    const r = await post('/v1/agents', { agent_id: bad, principal_ref: 'x' });
    t.equal(r.statusCode, 400, bad);
  }
});

t.test('a signature made before rotation verifies against the retired key; revoked keys leave the DID document', async (t) => {
  const signed = (await post('/v1/agents/buyer/sign', { message: 'I agree to pay 10.00 BRL' })).json();
  t.equal(signed.kid, buyer.kid);
  const rot = await post('/v1/agents/buyer/keys/rotate');
  t.equal(rot.statusCode, 201);
  t.match(rot.json(), { kid: `${buyer.agent_did}#2`, retired_kid: buyer.kid, status: 'active' });
  const path = `/${org.orgId}/buyer/did.json`;
  let doc = (await app.inject({ method: 'GET', url: path })).json();
  t.equal(doc.id, buyer.agent_did);
  const retired = doc.verificationMethod.find((m: { id: string }) => m.id === buyer.kid);
  t.ok(retired, 'the retired key is still published');
  t.notOk(doc.authentication.includes(buyer.kid), 'but no longer authenticates');
  const pub = Buffer.from(retired.publicKeyJwk.x, 'base64url');
  t.ok(ed.verify(Buffer.from(signed.signature, 'base64'), Buffer.from('I agree to pay 10.00 BRL'), pub), 'the old signature verifies against the published retired key');
  const newSig = (await post('/v1/agents/buyer/sign', { message: 'later' })).json();
  t.equal(newSig.kid, `${buyer.agent_did}#2`, 'signing now uses the new key');
  // Revoke the retired key (kid with # as %23).
  t.match(buyer.kid, /%3A/, 'the did:web holds its port percent-encoded');
  const rk = await post(`/v1/agents/buyer/keys/${buyer.kid.replace('#', '%23')}/revoke`);
  t.equal(rk.statusCode, 200);
  t.match(rk.json(), { kid: buyer.kid, status: 'revoked', revoked_at: /Z$/ });
  t.equal((await post(`/v1/agents/buyer/keys/${encodeURIComponent(buyer.kid)}/revoke`)).json().error.code, 'key_already_revoked');
  doc = (await app.inject({ method: 'GET', url: path })).json();
  t.notOk(doc.verificationMethod.some((m: { id: string }) => m.id === buyer.kid), 'the revoked key is gone from the document');
});

t.test('revoke the agent: every key, limits stated, no new mandate or signature', async (t) => {
  await post('/v1/agents/buyer/keys/rotate');
  const r = await post(`/v1/agents/${buyer.agent_did}/revoke`);
  t.equal(r.statusCode, 200, 'the did as written, in the path');
  const b = r.json();
  t.match(b, { did: buyer.agent_did, status: 'revoked', revoked_at: /Z$/ });
  t.same(b.revoked_kids, [`${buyer.agent_did}#2`, `${buyer.agent_did}#3`], 'the keys still unrevoked, in creation order');
  t.ok(b.limits.stops.length > 0 && b.limits.does_not_stop.includes('Signatures made before revocation'));
  t.equal((await post(`/v1/agents/${encodeURIComponent(buyer.agent_did)}/revoke`)).json().error.code, 'agent_already_revoked');
  t.equal((await post('/v1/agents/buyer/keys/rotate')).json().error.code, 'no_active_key');
  t.equal((await post('/v1/agents/buyer/sign', { message: 'x' })).json().error.code, 'no_active_key');
  const doc = (await app.inject({ method: 'GET', url: `/${org.orgId}/buyer/did.json` })).json();
  t.same([doc.deactivated, doc.verificationMethod], [true, []], 'the document says deactivated');
  const read = (await app.inject({ method: 'GET', url: '/v1/agents/buyer', headers: org.key })).json();
  t.equal(read.status, 'revoked');
  t.ok(read.keys.every((k: { status: string }) => k.status === 'revoked'));
});

t.test('deprecated organization-scoped forms', async (t) => {
  const ok = await post(`/v1/orgs/${org.orgId}/agents`, { agent_id: 'seller', principal_ref: 'p' });
  t.equal(ok.statusCode, 201);
  const rotated = await post(`/v1/orgs/${org.orgId}/agents/seller/keys/rotate`);
  t.equal(rotated.statusCode, 201);
  const revoked = await post(`/v1/orgs/${org.orgId}/agents/seller/keys/${encodeURIComponent(rotated.json().kid)}/revoke`);
  t.equal(revoked.statusCode, 200);
  t.match(revoked.json(), { kid: rotated.json().kid, status: 'revoked' });
  const wrongOrg = await post(`/v1/orgs/${other.orgId}/agents`, { agent_id: 'seller2', principal_ref: 'p' });
  t.equal(wrongOrg.statusCode, 403);
  t.equal((await post(`/v1/orgs/${encodeURIComponent('org with space')}/agents`, { agent_id: 'x', principal_ref: 'p' })).statusCode, 400);
  t.equal((await post(`/v1/orgs/${org.orgId}/agents`, { agent_id: 'seller', principal_ref: 'p' })).statusCode, 409);
});

t.test('private keys: encrypted in the vault, never in an event or a response', async (t) => {
  const { rows } = await ledger.db.query<{ ref: string; org_id: string; iv: Buffer; ciphertext: Buffer; tag: Buffer }>('SELECT ref, org_id, iv, ciphertext, tag FROM vault_secrets');
  t.ok(rows.length >= 5, 'one vault row per generated key');
  const events = JSON.stringify(await ledger.store.readAll({ maxCount: 10_000 }), (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
  const responses = [reg.body];
  for (const url of ['/v1/agents', '/v1/agents/buyer', '/v1/agents/seller']) responses.push((await app.inject({ method: 'GET', url, headers: org.key })).body);
  responses.push((await app.inject({ method: 'GET', url: `/${org.orgId}/seller/did.json` })).body);
  const seen = events + responses.join('');
  for (const r of rows) {
    const secret = await vault.get(r.org_id, r.ref);
    t.equal(secret?.length, 32, 'the vault gives back a 32-byte Ed25519 secret key');
    const raw = Buffer.concat([r.iv, r.ciphertext, r.tag]);
    t.equal(raw.indexOf(secret!), -1, 'no key bytes in clear in the vault row');
    for (const form of [secret!.toString('base64'), secret!.toString('base64url'), secret!.toString('hex')]) {
      if (seen.includes(form)) t.fail(`private key material leaked (${form.slice(0, 6)}...)`);
    }
    t.ok(events.includes(r.ref), 'the event names only the vault reference');
  }
  t.equal(await vault.get(other.orgId, rows[0]!.ref), undefined, "another organization cannot read the secret");
});
