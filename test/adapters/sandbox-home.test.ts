import fs from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { SandboxBank } from '../../src/adapters/bank/sandbox-bank.ts';
import { SandboxMerchants, SANDBOX_MERCHANT_USER } from '../../src/adapters/merchants/sandbox-merchants.ts';
import { sandboxHome } from '../../src/adapters/sandbox-home.ts';

// The sandboxes with a home (DATA_DIR/sandboxes) keep their state and their
// port across a restart; a remembered port taken by another process gives way
// to a free one, said in one line, and is taken back at the next start; a
// state file that does not parse is set aside, named in one line.

const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ledger-sandbox-home-'));
t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
const notes: string[] = [];
const home = sandboxHome(dir, (l) => notes.push(l));
/** A GET on a fresh connection (fetch's pool may hold a socket to the sandbox stopped a moment ago). */
const freshGet = (url: string, headers: Record<string, string>) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    http.get(url, { headers, agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    }).on('error', reject);
  });
const basic = `Basic ${Buffer.from('sandbox-client:sandbox-secret').toString('base64')}`;

t.test('the bank keeps its consents and tokens, on the same port', async (t) => {
  const bank = new SandboxBank(2, home);
  const url = await bank.start();
  const created = await (await fetch(`${url}/consents`, { method: 'POST', headers: { authorization: basic, 'content-type': 'application/json' }, body: JSON.stringify({ data: { redirectUri: 'http://127.0.0.1:1/cb' } }) })).json() as { data: { consentId: string } };
  const id = created.data.consentId;
  const back = new URL((await fetch(`${url}/authorise?consent_id=${encodeURIComponent(id)}&redirect_uri=${encodeURIComponent('http://127.0.0.1:1/cb')}&state=s`, { redirect: 'manual' })).headers.get('location')!);
  const token = (await (await fetch(`${url}/token`, { method: 'POST', headers: { authorization: basic, 'content-type': 'application/json' }, body: JSON.stringify({ code: back.searchParams.get('code') }) })).json() as { access_token: string }).access_token;
  await bank.stop();

  const again = new SandboxBank(2, home);
  t.equal(await again.start(), url, 'the same URL');
  t.teardown(() => again.stop());
  const page = await freshGet(`${url}/consents/${encodeURIComponent(id)}/transactions?page=1`, { authorization: `Bearer ${token}` });
  t.equal(page.status, 200, 'the token issued before the restart still reads the consent');
  t.equal(again.consents.get(id)?.status, 'AUTHORISED');
});

t.test('the merchants keep their sessions; a taken port gives way for one run and is taken back', async (t) => {
  const m = new SandboxMerchants(home);
  const url = await m.start();
  const login = await fetch(`${url}/merchant-a/login`, { method: 'POST', body: new URLSearchParams(SANDBOX_MERCHANT_USER), redirect: 'manual' });
  const cookie = login.headers.get('set-cookie')!.split(';')[0]!;
  await m.stop();

  // Another process holds the port meanwhile.
  const squatter = net.createServer();
  await new Promise<void>((r) => squatter.listen(Number(new URL(url).port), '127.0.0.1', r));
  const moved = new SandboxMerchants(home);
  const movedUrl = await moved.start();
  t.not(movedUrl, url, 'a free port for this run');
  t.match(notes.at(-1), new RegExp(`^the sandbox merchants: port ${new URL(url).port} \\(used last time\\) is taken by another process, listening on ${new URL(movedUrl).port} instead`));
  t.match((await freshGet(`${movedUrl}/merchant-a/account`, { cookie })).body, /Signed in as shopper/, 'the session survived');
  await moved.stop();
  await new Promise((r) => squatter.close(r));

  const back = new SandboxMerchants(home);
  t.equal(await back.start(), url, 'the remembered port is taken back once free');
  await back.stop();
});

t.test('a state file that does not parse is set aside, and the sandbox starts empty', async (t) => {
  await fs.writeFile(path.join(home.dir, 'bank.json'), '{"consents": [');
  const bank = new SandboxBank(2, home);
  t.equal(bank.consents.size, 0);
  t.match(notes.at(-1), /^the sandbox state file .*bank\.json could not be read; it was moved to .*bank\.json\.unreadable-\d+ and this sandbox starts empty$/);
  t.ok((await fs.readdir(home.dir)).some((f) => f.startsWith('bank.json.unreadable-')));
});
