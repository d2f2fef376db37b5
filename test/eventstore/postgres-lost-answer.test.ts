import net from 'node:net';
import t from 'tap';
import { orgDecider, orgStream } from '../../commands/org.ts';
import { getProject } from '../../projections/org.ts';
import { generateSigningKey } from '../../src/audit/note.ts';
import { handleCommand } from '../../src/eventstore/handler.ts';
import { PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { openDb } from '../../src/postgres/db.ts';
import { startReadSide } from '../../src/readside.ts';
import { testDatabase } from '../helpers/db.ts';
import { ev } from './conformance.ts';

// The answer to a write can be lost after PostgreSQL executed it (the
// connection breaks while the answer is on its way). The store must then find
// out whether the append is in the log, by its event ids, and answer
// accordingly: never report a written append as failed, never write it twice.
//
// A loopback proxy in front of the database loses one answer on demand: once
// armed, it closes both sides instead of forwarding the first server message
// that completes a command whose tag starts with the armed word.

class LossyProxy {
  private armed: string | undefined;
  lost = 0;
  private readonly server: net.Server;
  private constructor(private readonly target: { host: string; port: number }) {
    this.server = net.createServer((client) => this.pipe(client));
  }

  static async start(target: { host: string; port: number }): Promise<LossyProxy> {
    const p = new LossyProxy(target);
    await new Promise<void>((r) => p.server.listen(0, '127.0.0.1', r));
    return p;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  arm(tag: string): void {
    this.armed = tag;
  }

  private pipe(client: net.Socket): void {
    const upstream = net.connect(this.target.port, this.target.host);
    let pending = Buffer.alloc(0);
    client.on('data', (c) => upstream.write(c));
    upstream.on('data', (chunk: Buffer) => {
      // Server messages: a type byte, a 4-byte length (itself included), the body.
      pending = Buffer.concat([pending, chunk]);
      let lose = false;
      while (pending.length >= 5) {
        const len = pending.readUInt32BE(1);
        if (pending.length < 1 + len) break;
        if (this.armed && pending[0] === 0x43 /* C: CommandComplete */ && pending.subarray(5, 1 + len).toString('utf8').startsWith(this.armed)) lose = true;
        pending = pending.subarray(1 + len);
      }
      if (lose) {
        this.armed = undefined;
        this.lost++;
        client.destroy();
        upstream.destroy();
        return;
      }
      client.write(chunk);
    });
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
  }

  async stop(): Promise<void> {
    await new Promise((r) => this.server.close(r));
  }
}

const { url, db } = await testDatabase(t);
const direct = new URL(url);
const proxy = await LossyProxy.start({ host: direct.hostname, port: Number(direct.port) });
const viaProxy = new URL(url);
viaProxy.port = String(proxy.port);
t.teardown(() => proxy.stop());

t.test('the answer to a written append is lost: answered from the log, written once', async (t) => {
  const pdb = openDb(viaProxy.toString(), { max: 3 });
  const store = await PostgresEventStore.open(pdb);
  t.teardown(async () => {
    await store.close();
    await pdb.close();
  });
  const s = `lost-${Date.now()}`;
  proxy.arm('SELECT');
  const r = await store.appendToStream(s, [ev('test.lost', { n: 1 })], { expectedRevision: 'no_stream' });
  t.equal(proxy.lost, 1, 'the answer was lost on the way');
  t.equal(r.nextExpectedRevision, 0n);
  const logged = await (await PostgresEventStore.open(db)).readStream(s);
  t.equal(logged.length, 1, 'in the log once');
  t.equal(logged[0]!.position, r.lastPosition, 'answered with its position');
  // The store goes on: the next append on a fresh connection.
  t.equal((await store.appendToStream(s, [ev('test.lost', { n: 2 })], { expectedRevision: 0n })).nextExpectedRevision, 1n);
});

t.test('the COMMIT answer of an append transaction with inline followers is lost: the command is acknowledged once and read back', async (t) => {
  const pdb = openDb(viaProxy.toString(), { max: 5 });
  const store = await PostgresEventStore.open(pdb);
  const readSide = await startReadSide(pdb, store, { signingKey: generateSigningKey('lost'), origin: 'test/audit' }, undefined, { reactors: false });
  t.teardown(async () => {
    await readSide.stop();
    await store.close();
    await pdb.close();
  });
  const org = 'org_lost_answer';
  const ctx = { orgId: org, projectId: null, actor: { kind: 'user' as const, id: 'usr_lost' }, requestId: null, now: () => new Date('2026-11-24T10:00:00.000Z') };
  await handleCommand(store, orgDecider, orgStream(org), { type: 'create_org', orgId: org, name: 'Lost', defaultProjectId: 'prj_lost_default', owner: { userId: 'usr_lost', email: 'l@example.com', displayName: null } }, ctx);
  await readSide.waitFor(await store.headPosition(), 60_000);
  const lostBefore = proxy.lost;
  proxy.arm('COMMIT');
  const r = await handleCommand(store, orgDecider, orgStream(org), { type: 'create_project', projectId: 'prj_lost_1', name: 'One', slug: 'one', environment: 'test', settings: {} }, ctx);
  t.equal(proxy.lost, lostBefore + 1, 'the COMMIT answer was lost on the way');
  t.ok(r.changed && r.lastPosition, 'acknowledged');
  t.ok(await readSide.waitFor(r.lastPosition!, 60_000), 'the read side has it');
  t.ok(await getProject(db, org, 'prj_lost_1'));
  const created = (await (await PostgresEventStore.open(db)).readStream(orgStream(org))).filter((e) => e.type === 'project.created' && (e.data as { project_id: string }).project_id === 'prj_lost_1');
  t.equal(created.length, 1, 'decided and written once');
});
