import { randomUUID } from 'node:crypto';
import t from 'tap';
import { agentDecider, agentStream, type AgentCommand } from '../../commands/agent.ts';
import { handleCommand, Rejection, type CommandContext } from '../../src/eventstore/handler.ts';
import { twoStores } from '../helpers/db.ts';

// The command handler decides on its cached folded state without reading the
// stream. Two processes on one database (two stores, two pools, two caches):
// whatever one appended, the other's next command must decide on, never on
// its stale cache, and a stale cache must not surface as a conflict or a refusal.

const { storeA, storeB } = await twoStores(t);

const ctx: CommandContext = { orgId: 'org_cache', projectId: null, actor: { kind: 'system', id: 'test' }, requestId: null, now: () => new Date('2026-11-23T12:00:00.000Z') };
const key = () => ({ pubkey: randomUUID(), privateKeyRef: `vault:${randomUUID()}` });

async function registered(handle: string) {
  const stream = agentStream(ctx.orgId, handle);
  await handleCommand(storeA, agentDecider, stream, { type: 'register', handle, did: `did:web:example.com:${handle}`, principalRef: 'p', displayName: null, key: key() }, ctx);
  return stream;
}

t.test('a command after another process appended decides on the latest state', async (t) => {
  const stream = await registered('a1');
  await handleCommand(storeB, agentDecider, stream, { type: 'rotate', key: key() }, ctx); // key #2, by the other process
  const r = await handleCommand(storeA, agentDecider, stream, { type: 'rotate', key: key() }, ctx); // A's cache still says one key
  const data = r.events[0]!.data as { ordinal: number; retired_kid: string };
  t.equal(data.ordinal, 3, 'the new key is the third: the second process rotation was seen');
  t.match(data.retired_kid, /#2$/, 'it retires the key the other process created');
  const events = await storeA.readStream(stream);
  t.same(events.map((e) => [e.revision, e.type]), [[0n, 'agent.registered'], [1n, 'agent.key_rotated'], [2n, 'agent.key_rotated']], 'one append each, no duplicate');
});

t.test('a stale cache is not a conflict: conflictCode applies only to changes during the decision', async (t) => {
  const stream = await registered('a2');
  await handleCommand(storeB, agentDecider, stream, { type: 'rotate', key: key() }, ctx);
  const r = await handleCommand(storeA, agentDecider, stream, { type: 'rotate', key: key() } as AgentCommand, ctx, { conflictCode: 'transition_conflict' });
  t.equal(r.changed, true, 'decided again from the stream and appended');
});

t.test('a refusal is never answered from a stale cache', async (t) => {
  const stream = await registered('a3');
  const rotated = await handleCommand(storeB, agentDecider, stream, { type: 'rotate', key: key() }, ctx);
  const kid = (rotated.events[0]!.data as { kid: string }).kid;
  // A's cache knows no key #2: deciding on it alone would answer key_not_found.
  const r = await handleCommand(storeA, agentDecider, stream, { type: 'revoke_key', kid }, ctx);
  t.equal(r.events[0]!.type, 'agent.key_revoked');
  // And a refusal that holds on the latest state is still answered.
  const again = await handleCommand(storeA, agentDecider, stream, { type: 'revoke_key', kid }, ctx).then(
    () => 'accepted',
    (err: unknown) => (err instanceof Rejection ? err.code : String(err)),
  );
  t.equal(again, 'key_already_revoked');
});

t.test('concurrent commands through both processes: every acknowledged one is in the stream, in a consistent order', async (t) => {
  const stream = await registered('a4');
  const results = await Promise.all(Array.from({ length: 20 }, (_, i) => handleCommand(i % 2 ? storeA : storeB, agentDecider, stream, { type: 'rotate', key: key() }, ctx)));
  const ordinals = results.map((r) => (r.events[0]!.data as { ordinal: number }).ordinal).sort((a, b) => a - b);
  t.same(ordinals, Array.from({ length: 20 }, (_, i) => i + 2), 'ordinals 2..21, each once');
  const events = await storeA.readStream(stream);
  t.equal(events.length, 21);
  events.slice(1).forEach((e, i) => t.equal((e.data as { ordinal: number }).ordinal, i + 2, `revision ${i + 1} holds ordinal ${i + 2}`));
});
