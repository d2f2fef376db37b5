import { spawn } from 'node:child_process';
import t from 'tap';
import { type AuditEntry, auditStream } from '../../src/audit/chain.ts';
import { signingKeyFromSeed } from '../../src/audit/note.ts';
import { chainItems, verifyOrgChain } from '../../src/audit/verifier.ts';
import { PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { startReadSide } from '../../src/readside.ts';
import { testDatabase } from '../helpers/db.ts';
import { until } from '../helpers/wait.ts';
import { nodeArgs } from '../helpers/entry.ts';

// Issue 57: SIGKILL under load while chains switch to version 2. A process
// appends facts of 12 organizations with the sealer set to switch (each chain
// switches inline the first time it is sealed) and is killed mid-flight. On
// restart nothing acknowledged is lost: every acknowledged fact is in its
// organization's chain (as a v1 entry's source or as a linked v2 entry), and
// every chain verifies.

t.test('killed while chains switch: every acknowledged fact is in its chain, every chain verifies after restart', async (t) => {
  const { url, db } = await testDatabase(t, { schema: true });
  const child = spawn(process.execPath, [...nodeArgs('test/fixtures/switch-forever.ts'), url], { stdio: ['ignore', 'pipe', 'inherit'] });
  const acked: [string, string][] = [];
  let buf = '';
  await new Promise<void>((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`the writer exited (${code}) before it was killed`)));
    child.stdout.on('data', (chunk: Buffer) => {
      buf += chunk.toString();
      const lines = buf.split('\n');
      buf = lines.pop() ?? '';
      for (const l of lines.filter(Boolean)) acked.push(l.split(' ') as [string, string]);
      if (acked.length >= 120) resolve();
    });
  });
  child.removeAllListeners('exit');
  child.kill('SIGKILL');
  await new Promise((r) => child.on('exit', r));
  await until(
    async () => (await db.query<{ n: string }>(`SELECT count(*)::text AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL`)).rows[0]!.n === '0',
    'the killed writer’s transactions to end',
  );

  const key = signingKeyFromSeed('switch-kill', Buffer.alloc(32, 9));
  const store = await PostgresEventStore.open(db);
  const readSide = await startReadSide(db, store, { signingKey: key, origin: 'agent-ledger/audit', format: 2, checkpointEveryEntries: 4 }, undefined, { reactors: false });
  t.teardown(async () => {
    await readSide.stop();
    await store.close();
  });
  t.ok(await readSide.waitFor(await store.headPosition(), 120_000), 'the restarted sealer caught up');
  await readSide.sealer.checkpointAll(true);

  const orgs = [...new Set(acked.map(([org]) => org))];
  const { rows } = await db.query<{ n: string }>('SELECT count(*)::text AS n FROM audit_chain_head');
  t.ok(Number(rows[0]!.n) > 0, 'chains switched before the kill');
  for (const org of orgs) {
    const inChain = new Set<string>();
    for await (const item of chainItems(store, org)) inChain.add('linked' in item ? item.linked.id : (item.entry as AuditEntry).source.event_id);
    const missing = acked.filter(([o, id]) => o === org && !inChain.has(id));
    t.same(missing, [], `${org}: every acknowledged fact is in the chain`);
    const report = await verifyOrgChain(store, org, key, 'agent-ledger/audit');
    t.ok(report.ok, `${org}: the chain verifies (${report.entries} entries, ${(await store.readStream(auditStream(org))).length} of them v1)${report.ok ? '' : `: ${JSON.stringify(report.first_problem)}`}`);
  }
});
