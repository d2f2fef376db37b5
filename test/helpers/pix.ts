import type { Test } from 'tap';
import type { AddressInfo } from 'node:net';
import { HttpPsp } from '../../src/adapters/psp/http-psp.ts';
import { UnconfiguredPsp } from '../../src/adapters/psp/port.ts';
import { SandboxPsp } from '../../src/adapters/psp/sandbox-psp.ts';
import { bootstrapOrg, testApp, testClock } from './app.ts';

// A test app wired to a sandbox PSP on loopback, listening on a real port so
// the PSP's notifications reach it over HTTP; two organizations.

export async function pixApp(t: Test) {
  const sandbox = new SandboxPsp();
  await sandbox.start();
  t.teardown(() => sandbox.stop());
  // A call the sandbox holds unanswered ends at this timeout (the uncertain case).
  const psp = new HttpPsp('sandbox', { baseUrl: sandbox.url, clientId: sandbox.clientId, clientSecret: sandbox.clientSecret, webhookSecret: sandbox.webhookSecret, timeoutMs: 3_000 });
  const clock = testClock();
  const { app, ledger } = await testApp(t, { now: clock.now, pix: { sandbox: psp, live: new UnconfiguredPsp() } });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  await psp.configureWebhook(`${base}/v1/pix/notifications/sandbox`);
  const org = await bootstrapOrg(app, 'Pix');
  const other = await bootstrapOrg(app, 'Elsewhere');
  const call = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown, headers: Record<string, string> = org.key) =>
    app.inject({ method, url, headers, ...(payload !== undefined ? { payload: payload as Record<string, unknown> } : {}) });
  const consumer = async (headers = org.key) => (await call('POST', '/v1/consumers', { display_name: 'Ana' }, headers)).json().id as string;
  /** The simulated payer pays at the sandbox PSP, which notifies us `entregas` times. */
  const pay = async (body: Record<string, unknown>) => {
    const r = await fetch(`${sandbox.url}/sandbox/pagamentos`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return (await r.json()) as { endToEndId: string; deliveries: number[] };
  };
  /** Events appended so far: a refusal must leave this unchanged. */
  const head = () => ledger.store.headPosition();
  return { app, ledger, sandbox, psp, clock, base, org, other, call, consumer, pay, head };
}

export const CPF = '529.982.247-25';
export const CPF_DIGITS = '52998224725';
export const OTHER_CPF = '111.444.777-35';
export const CNPJ = '11.222.333/0001-81';
