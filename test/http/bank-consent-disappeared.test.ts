import t from 'tap';
import { HttpBank } from '../../src/adapters/bank/http-bank.ts';
import { SandboxBank } from '../../src/adapters/bank/sandbox-bank.ts';
import type { Bank } from '../../src/adapters/bank/port.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';

// A consent written and acknowledged by the log that its read model cannot
// show (here: the bank consent projection refuses every new row) answers the
// spec's 500 consent_disappeared ("row written, not readable; do not retry
// blind"), not a 404 that says it does not exist; the write stands.

const sandbox = new SandboxBank(5);
const url = await sandbox.start();
t.teardown(() => sandbox.stop());
const banks = new Map<string, Bank>([['sandbox-bank', new HttpBank('sandbox-bank', { baseUrl: url, clientId: sandbox.clientId, clientSecret: sandbox.clientSecret, timeoutMs: 5_000 })]]);
const { app, ledger } = await testApp(t, { banks, readWaitMs: 300 });
const org = await bootstrapOrg(app, 'Vanishing');
const consumer = (await app.inject({ method: 'POST', url: '/v1/consumers', headers: org.key, payload: {} })).json();

t.test('written, not readable: 500 consent_disappeared with the consent id; the consent is in the log', async (t) => {
  await ledger.db.query('ALTER TABLE bank_consents ADD CONSTRAINT refuse_new_rows CHECK (false) NOT VALID');
  const r = await app.inject({
    method: 'POST',
    url: '/v1/ofb/consents',
    headers: org.key,
    payload: { bank_id: 'sandbox-bank', consumer_id: consumer.id, redirect_url: 'https://app.example.com/ofb/return', scopes: ['ACCOUNTS_READ'] },
  });
  t.equal(r.statusCode, 500);
  t.equal(r.json().error.code, 'consent_disappeared');
  const id = r.json().error.details.consent_id as string;
  t.match(id, /^ofb_/);
  const events = await ledger.store.readStream(`bank_consent-${id}`);
  t.equal(events[0]?.type, 'bank_consent.initiated', 'the write stands');
});
