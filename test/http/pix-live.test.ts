import t from 'tap';
import { openPix } from '../../src/adapters/psp/config.ts';
import { HttpPsp } from '../../src/adapters/psp/http-psp.ts';
import { PspError, UnconfiguredPsp } from '../../src/adapters/psp/port.ts';
import { SandboxPsp } from '../../src/adapters/psp/sandbox-psp.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { CPF } from '../helpers/pix.ts';

// The live PSP is the same HTTP adapter configured by environment; without
// configuration live Pix answers 501 not_wired. Here a second sandbox stands
// in for a live PSP, then goes away (connection refused).

t.test('configuration from the environment', async (t) => {
  const none = await openPix({ SANDBOX_PSP: 'off' }, 'http://127.0.0.1:1');
  t.equal(none.deps.sandbox, undefined);
  t.ok(none.deps.live instanceof UnconfiguredPsp);
  t.equal(await none.deps.live.listKeys('x').then(() => 'ok', (e: PspError) => e.reason), 'not_configured');
  const live = await openPix({ SANDBOX_PSP: 'off', PIX_PSP_URL: 'https://psp.example', PIX_PSP_CLIENT_ID: 'id', PIX_PSP_CLIENT_SECRET: 's', PIX_PSP_WEBHOOK_SECRET: 'whsec_c2VjcmV0' }, 'http://127.0.0.1:1');
  t.ok(live.deps.live instanceof HttpPsp);
  const sandboxed = await openPix({}, 'http://127.0.0.1:1');
  t.teardown(() => sandboxed.stop());
  t.ok(sandboxed.deps.sandbox instanceof HttpPsp, 'the sandbox PSP is on by default');
});

t.test('a live PSP over HTTP, then unreachable', async (t) => {
  const livePsp = new SandboxPsp();
  await livePsp.start();
  const live = new HttpPsp('live', { baseUrl: livePsp.url, clientId: livePsp.clientId, clientSecret: livePsp.clientSecret, webhookSecret: livePsp.webhookSecret, timeoutMs: 3_000 });
  const { app, ledger } = await testApp(t, { pix: { sandbox: undefined, live } });
  const org = await bootstrapOrg(app, 'Live');
  const headers = { authorization: `Bearer ${org.liveKey}` };
  const consumer = (await app.inject({ method: 'POST', url: '/v1/consumers', headers, payload: {} })).json().id;
  const opened = await app.inject({ method: 'POST', url: `/v1/consumers/${consumer}/pix/partner-account`, headers, payload: { document: CPF } });
  t.equal(opened.statusCode, 201, opened.body);
  t.equal(opened.json().psp, 'live');
  const evp = await app.inject({ method: 'POST', url: `/v1/consumers/${consumer}/pix-keys`, headers, payload: { key_type: 'EVP' } });
  t.equal(evp.statusCode, 201);
  await livePsp.stop();
  const before = await ledger.store.headPosition();
  const r = await app.inject({ method: 'POST', url: `/v1/consumers/${consumer}/pix-keys`, headers, payload: { key_type: 'EVP' } });
  t.equal(r.statusCode, 502);
  t.equal(r.json().error.code, 'pix_key_provider_unavailable');
  t.notOk('details' in r.json().error, 'the variant without details: nothing reached the PSP');
  t.equal(await ledger.store.headPosition(), before);
  t.ok(new PspError('timeout', 'x').outcomeUnknown);
});
