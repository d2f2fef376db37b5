import path from 'node:path';
import t from 'tap';
import { parseCosignerKey } from '../../src/audit/cosignature.ts';
import { generateSigningKey } from '../../src/audit/note.ts';
import { type TrustedLog, Witness } from '../../src/audit/witness.ts';
import { WitnessSubmitter } from '../../src/audit/witness-client.ts';
import { AUDIT_ORIGIN } from '../../src/runtime.ts';
import { findChromium } from '../../src/adapters/browser/chromium.ts';
import { storedEntryEvent } from '../helpers/audit-entries.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { axeViolations, chromium, listen, scrollsSideways, signIn } from './browser.ts';

// The audit page in real Chromium: an entry's inclusion proof and signed
// checkpoint verified in the page itself (and a proof tampered on the wire
// shown failing, and a tampered stored entry too), an incident made by
// tampering acknowledged through the page (the person recorded as actor),
// the thresholds changed and refused as the API refuses, axe-core clean, and
// no sideways scrolling at 375 and 1440 px.

if (!(await findChromium())) {
  t.skip('no Chromium found (CHROMIUM_PATH, /usr/bin/chromium or @sparticuz/chromium): the audit page tests did not run', async () => {});
} else {
  // One witness on loopback cosigns the checkpoints (C2SP tlog-witness).
  const logs: TrustedLog[] = [];
  const witness = new Witness({ key: generateSigningKey('w1.example/witness'), logs, stateFile: path.join(t.testdir({}), 'w1.json') });
  const endpoints = [{ url: await witness.listen(), vkey: witness.verifierKey, key: parseCosignerKey(witness.verifierKey) }];
  t.teardown(() => witness.close());
  const { app, ledger, sandboxProviders } = await testApp(t, { checkpointEveryEntries: 2, providers: true, auditWitnesses: endpoints });
  logs.push({ originPrefix: `${AUDIT_ORIGIN}/`, key: ledger.key });
  const org = await bootstrapOrg(app, 'AuditedDash');
  for (let i = 0; i < 6; i++) await app.inject({ method: 'POST', url: '/v1/projects', headers: org.key, payload: { name: `P${i}`, slug: `p-${i}` } });
  await ledger.settle();
  await ledger.readSide.sealer.checkpointAll(true);
  await new WitnessSubmitter(ledger.db, ledger.store, endpoints, { timeoutMs: 10_000 }).runOnce();
  await ledger.settle();
  const base = await listen(app);
  const browser = await chromium(t);
  const page = await signIn(await browser.newContext(), base, sandboxProviders!.url, 'owner+auditeddash@example.com');

  const verifyOutcome = async (seq: number) => {
    await page.click(`#verify-btn-${seq}`);
    await page.waitForSelector(`#verify-${seq}[data-state="verified"], #verify-${seq}[data-state="failed"]`);
    return { state: await page.getAttribute(`#verify-${seq}`, 'data-state'), text: (await page.textContent(`#verify-${seq}`)) ?? '' };
  };

  t.test('an entry verifies in the page; a proof changed on the wire fails', async (t) => {
    const res = await page.goto(`${base}/dashboard/audit`);
    t.equal(res?.status(), 200);
    t.match(await page.textContent('#chain-size'), /^\d+$/);
    t.match(await page.textContent('#checkpoint-note'), /^agent-ledger\/audit\//);
    t.match(await page.textContent('#cosigned'), /cosigned by w1\.example\/witness/, "the witness's cosignature");
    t.match(await page.textContent('#witnesses'), /w1\.example\/witness/);
    const good = await verifyOutcome(3);
    t.equal(good.state, 'verified', good.text);
    t.match(good.text, /Ed25519 verified in this browser/);

    await page.route(`**/dashboard/audit/entries/3/proof`, async (route) => {
      const response = await route.fetch();
      const body = await response.json();
      const h = body.proof[0] as string;
      body.proof[0] = `${h[0] === '0' ? '1' : '0'}${h.slice(1)}`;
      await route.fulfill({ response, json: body });
    });
    const bad = await verifyOutcome(3);
    t.equal(bad.state, 'failed');
    t.match(bad.text, /does not lead to the signed root/);
    await page.unroute(`**/dashboard/audit/entries/3/proof`);

    // A browser without Ed25519 in WebCrypto: the page imports @noble/ed25519 and still verifies.
    const older = await page.context().newPage();
    await older.addInitScript(() => {
      const importKey = crypto.subtle.importKey.bind(crypto.subtle);
      crypto.subtle.importKey = ((format: never, key: never, alg: { name?: string } | string, ...rest: never[]) =>
        (typeof alg === 'string' ? alg : alg?.name) === 'Ed25519' ? Promise.reject(new DOMException('Ed25519 is not supported', 'NotSupportedError')) : importKey(format, key, alg as never, ...(rest as [never, never]))) as typeof crypto.subtle.importKey;
    });
    await older.goto(`${base}/dashboard/audit`);
    t.equal(await older.evaluate(() => crypto.subtle.importKey('raw', new Uint8Array(32), { name: 'Ed25519' }, false, ['verify']).then(() => 'supported', (e: Error) => e.name)), 'NotSupportedError', 'this page has no Ed25519 in WebCrypto');
    await older.click('#verify-btn-3');
    await older.waitForSelector('#verify-3[data-state="verified"], #verify-3[data-state="failed"]');
    t.equal(await older.getAttribute('#verify-3', 'data-state'), 'verified', (await older.textContent('#verify-3')) ?? '');

    // A pinned key that is not the signer's: the signature step fails.
    await page.fill('#verifier-key', `someone-else+00000000+AQ${'A'.repeat(42)}`);
    const wrongKey = await verifyOutcome(3);
    t.equal(wrongKey.state, 'failed');
    t.match(wrongKey.text, /signature step: could not check: the verifier key id does not match its key/);
    await page.evaluate(() => localStorage.clear());
  });

  t.test('a tampered entry: the browser sees it, verification opens an incident, a person acknowledges it', async (t) => {
    const original = await storedEntryEvent(ledger.db, ledger.store, org.orgId, 4);
    await ledger.db.query('UPDATE es_events SET data = $2::json WHERE position = $1', [original.position, JSON.stringify(original.forged)]);
    t.teardown(() => ledger.db.query('UPDATE es_events SET data = $2::json WHERE position = $1', [original.position, JSON.stringify(original.data)]));
    await ledger.readSide.verifier.verifyOrg(org.orgId);
    await ledger.settle();

    await page.goto(`${base}/dashboard/audit`);
    const forged = await verifyOutcome(4);
    t.equal(forged.state, 'failed');
    t.match(forged.text, /payload does not match its commitment/);
    t.match(await page.textContent('#health'), /broken/);

    await page.click('#incidents a[data-incident]');
    t.match(page.url(), /\/dashboard\/audit\/incidents\//);
    // An incomplete form: nothing is written, the errors say what to do.
    await page.click('#acknowledge');
    t.match(await page.textContent('#error-summary'), /personal data/);
    await page.check('#personal-no');
    await page.check('#anpd-not_required');
    await page.fill('#resolution_summary', 'Row restored from the backup; cause was a manual edit.');
    await page.click('#acknowledge');
    t.match(page.url(), /\/dashboard\/audit#incidents-title$/);
    t.match(await page.textContent('#notice'), /Incident acknowledged/);
    t.match(await page.textContent('#incidents'), /acknowledged/);

    const incidents = (await app.inject({ method: 'GET', url: '/v1/audit-events/incidents?status=acknowledged', headers: org.key })).json().incidents;
    t.equal(incidents.length, 1);
    const acked = (await ledger.store.readStream(`audit_incident-${incidents[0].id}`)).find((e) => e.type === 'audit.incident_acknowledged');
    t.same(acked?.metadata.actor, { kind: 'user', id: org.ownerId }, 'the person is the actor');
  });

  t.test('thresholds: a change lands with the person as actor, the regulatory ceiling is refused and nothing changes', async (t) => {
    await page.goto(`${base}/dashboard/audit`);
    await page.fill('#hot_max_staleness_seconds', '999999');
    await page.click('#save-config');
    t.match(await page.textContent('#error-summary'), /at most 259200/);
    t.equal((await app.inject({ method: 'GET', url: '/v1/audit-events/config', headers: org.key })).json().hot_max_staleness_seconds, 3600, 'unchanged');
    await page.fill('#hot_max_staleness_seconds', '1800');
    await page.click('#save-config');
    t.match(await page.textContent('#notice'), /Thresholds saved/);
    t.equal((await app.inject({ method: 'GET', url: '/v1/audit-events/config', headers: org.key })).json().hot_max_staleness_seconds, 1800);
    const updated = (await ledger.store.readStream(`audit_config-${org.orgId}`)).filter((e) => e.type === 'audit.config_updated');
    t.same(updated.at(-1)?.metadata.actor, { kind: 'user', id: org.ownerId });
  });

  t.test('the explorer filters by type and pages by cursor', async (t) => {
    await page.goto(`${base}/dashboard/audit?type=project.`);
    const types = await page.$$eval('#events tbody tr td:nth-child(2)', (tds) => tds.map((td) => td.textContent));
    t.ok(types.length >= 6 && types.every((x) => x?.startsWith('project.')), types.join(','));
    await page.goto(`${base}/dashboard/audit?from=not-a-date`);
    t.match(await page.textContent('#error-summary'), /From must be a date/);
  });

  t.test('a version 2 entry (the event itself, with its link) verifies in the page; its payload changed in the log fails', async (t) => {
    const v2 = await testApp(t, { checkpointEveryEntries: 2, providers: true, auditFormat: 2 });
    const o = await bootstrapOrg(v2.app, 'LinkedDash');
    for (let i = 0; i < 3; i++) await v2.app.inject({ method: 'POST', url: '/v1/projects', headers: o.key, payload: { name: `L${i}`, slug: `l-${i}` } });
    await v2.ledger.settle();
    await v2.ledger.readSide.sealer.checkpointAll(true);
    const at = await listen(v2.app);
    const context = await browser.newContext();
    t.teardown(() => context.close());
    const p = await signIn(context, at, v2.sandboxProviders!.url, 'owner+linkeddash@example.com');
    // The last entry the latest signed checkpoint covers: a linked event whatever sequence the chain switched at.
    const { size } = (await v2.app.inject({ method: 'GET', url: '/v1/audit-events/checkpoint', headers: o.key })).json() as { size: number };
    const entry = (await v2.app.inject({ method: 'GET', url: `/v1/audit-events/entries?after_sequence=${size - 1}&limit=1`, headers: o.key })).json().entries[0] as { format?: number; sequence_number: number; event?: { event_type: string } };
    t.equal(entry.format, 2, `entry ${size}, a version 2 entry (${entry.event?.event_type})`);
    const seq = entry.sequence_number;
    const outcome = async () => {
      await p.goto(`${at}/dashboard/audit`);
      await p.click(`#verify-btn-${seq}`);
      await p.waitForSelector(`#verify-${seq}[data-state="verified"], #verify-${seq}[data-state="failed"]`);
      return { state: await p.getAttribute(`#verify-${seq}`, 'data-state'), text: (await p.textContent(`#verify-${seq}`)) ?? '' };
    };
    const good = await outcome();
    t.equal(good.state, 'verified', good.text);
    t.match(good.text, new RegExp(`entry ${seq} \\(${entry.event!.event_type.replace('.', '\\.')}\\) hashes to [0-9a-f]{16}…, and its payload matches its commitment.*Ed25519 verified in this browser`));
    const stored = await storedEntryEvent(v2.ledger.db, v2.ledger.store, o.orgId, seq);
    await v2.ledger.db.query('UPDATE es_events SET data = $2::json WHERE position = $1', [stored.position, JSON.stringify(stored.forged)]);
    const forged = await outcome();
    t.equal(forged.state, 'failed');
    t.match(forged.text, /entry step: the payload does not match its commitment in the link/);
  });

  t.test('axe-core finds nothing; no sideways scrolling at 375 and 1440 px', async (t) => {
    for (const width of [375, 1440]) {
      await page.setViewportSize({ width, height: 900 });
      await page.goto(`${base}/dashboard/audit`);
      t.notOk(await scrollsSideways(page), `${width} px: no sideways scrolling`);
      t.same(await axeViolations(page), [], `${width} px: axe-core`);
    }
  });
}
