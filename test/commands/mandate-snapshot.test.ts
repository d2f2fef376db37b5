import fc from 'fast-check';
import { isDeepStrictEqual } from 'node:util';
import t from 'tap';
import { mandateDecider, type MandateCommand, type MandateState } from '../../commands/mandate.ts';
import { type DomainEvent, parseEvent } from '../../events/index.ts';
import { Rejection } from '../../src/eventstore/handler.ts';
import { deserializeState, serializeState } from '../../src/eventstore/snapshots.ts';

// A snapshot never changes a decision: for random histories of the mandate
// (commands decided and evolved, with clocks crossing expires_at), the state
// at a random cut, written as a snapshot and read back, then folded with the
// rest of the history, equals the state folded from the start, and decides
// every next command the same way.

const tenant = { orgId: 'org_1', projectId: 'prj_1' };
const other = { orgId: 'org_1', projectId: 'prj_2' };
const expiresAt = '2026-12-31T00:00:00.000Z';

const create: MandateCommand = {
  type: 'create',
  mandateId: 'mdt_1',
  tenant,
  consumerId: 'cns_1',
  agentId: 'buyer',
  agentDid: 'did:web:x:org_1:buyer',
  agentActive: true,
  purpose: 'groceries',
  displayName: null,
  intentNote: null,
  allowlist: ['shop@pix.example', 'Other@Pix.example'],
  pinKind: 'pix-key',
  cap: 5_000n,
  perTx: 700n,
  currency: 'BRL',
  expiresAt,
};

const command: fc.Arbitrary<MandateCommand> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ amount: fc.bigInt(0n, 900n), merchant: fc.constantFrom('shop@pix.example', 'OTHER@pix.example', 'nope@pix.example'), currency: fc.constantFrom('BRL', 'USD'), t: fc.constantFrom(tenant, other), id: fc.nat() }).map(
    ({ amount, merchant, currency, t, id }): MandateCommand => ({ type: 'spend', tenant: t, spend: { transactionId: `txn_${id}`, channel: 'api', amount, currency, merchant, description: null } }),
  ) },
  { weight: 2, arbitrary: fc.record({ to: fc.constantFrom('paused' as const, 'active' as const, 'paused' as const, 'active' as const, 'revoked' as const), reason: fc.option(fc.string({ maxLength: 8 })) }).map(({ to, reason }): MandateCommand => ({ type: 'move', tenant, to, reason })) },
  { weight: 1, arbitrary: fc.constant<MandateCommand>({ type: 'expire' }) },
  { weight: 1, arbitrary: fc.nat().map((n): MandateCommand => ({ type: 'bind_card', tenant, cardId: `card_${n}`, issuer: 'sandbox' })) },
  { weight: 1, arbitrary: fc.constant<MandateCommand>({ type: 'revoke_card', tenant }) },
  { weight: 1, arbitrary: fc.constant(create) },
);

// Clocks before and after expires_at, in order.
// Clocks mostly minutes apart, now and then weeks (past expires_at, sooner or later).
const step = fc.record({ command, minutes: fc.oneof({ weight: 30, arbitrary: fc.integer({ min: 0, max: 120 }) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 60 * 24 * 30 }) }) });

function at(minutes: number): string {
  return new Date(Date.parse('2026-11-01T00:00:00.000Z') + minutes * 60_000).toISOString();
}

/** The decision as data: the events, or the refusal's code. */
function decision(cmd: MandateCommand, state: MandateState, now: string): unknown {
  try {
    return { events: mandateDecider.decide(cmd, state, { now }) };
  } catch (err) {
    if (err instanceof Rejection) return { rejected: err.code, details: err.details };
    throw err;
  }
}

/** A history: the events as the log holds them (parsed as a reader parses them), and the clock at its end. */
function history(steps: { command: MandateCommand; minutes: number }[]): { events: DomainEvent[]; clock: number } {
  let state = mandateDecider.initialState();
  const events: DomainEvent[] = [];
  let clock = 0;
  for (const s of [{ command: create, minutes: 0 }, ...steps]) {
    clock += s.minutes;
    const d = decision(s.command, state, at(clock)) as { events?: DomainEvent[] };
    for (const e of d.events ?? []) {
      const stored = parseEvent(e.type, JSON.parse(JSON.stringify(e.data)));
      events.push(stored);
      state = mandateDecider.evolve(state, stored);
    }
  }
  return { events, clock };
}

const fold = (state: MandateState, events: readonly DomainEvent[]) => events.reduce((s, e) => mandateDecider.evolve(s, e), state);

t.test('folding from a snapshot and from the start give the same state and the same decisions', async (t) => {
  let cuts = 0;
  let total = 0;
  fc.assert(
    fc.property(fc.array(step, { maxLength: 200, size: 'max' }), fc.double({ min: 0, max: 1, noNaN: true }), fc.array(step, { minLength: 1, maxLength: 5 }), (steps, where, next) => {
      const { events, clock } = history(steps);
      const cut = Math.floor(where * (events.length + 1));
      const full = fold(mandateDecider.initialState(), events);
      const text = serializeState(fold(mandateDecider.initialState(), events.slice(0, cut)));
      if (text === undefined) throw new Error('a mandate state must be snapshottable');
      const fromSnapshot = fold(deserializeState(text) as MandateState, events.slice(cut));
      if (!isDeepStrictEqual(fromSnapshot, full)) throw new Error(`the states differ: ${JSON.stringify(serializeState(fromSnapshot))} vs ${JSON.stringify(serializeState(full))}`);
      if (JSON.stringify(serializeState(fromSnapshot)) !== JSON.stringify(serializeState(full))) throw new Error('the states serialize differently');
      let c = clock;
      for (const n of next) {
        c += n.minutes;
        const a = decision(n.command, full, at(c));
        const b = decision(n.command, fromSnapshot, at(c));
        if (JSON.stringify(a, (_k, v) => (typeof v === 'bigint' ? `${v}n` : v)) !== JSON.stringify(b, (_k, v) => (typeof v === 'bigint' ? `${v}n` : v))) throw new Error('a decision changed');
      }
      cuts++;
      total += events.length;
    }),
    { numRuns: 300 },
  );
  t.equal(cuts, 300, 'every run compared');
  t.ok(total / cuts > 10, `histories of ${(total / cuts).toFixed(1)} events on average`);
});

t.test('the codec: tagged values round-trip, and a state that would not is not snapshotted', async (t) => {
  const state = {
    n: 12345678901234567890n,
    when: new Date('2026-01-02T03:04:05.006Z'),
    m: new Map<unknown, unknown>([['a', 1n], [2, new Set(['x'])]]),
    u: undefined,
    tricky: { $bigint: 'not a tag' },
    list: [null, true, 'x', { $map: 1, other: 2 }],
  };
  const text = serializeState(state);
  t.ok(text, 'snapshottable');
  t.strictSame(deserializeState(text!), state, 'reads back deep-equal');
  t.equal(serializeState({ n: Number.NaN }), undefined, 'NaN does not survive JSON: not snapshotted');
  t.equal(serializeState({ z: -0 }), undefined, '-0 does not survive JSON: not snapshotted');
  t.equal(serializeState({ c: new (class X {})() }), undefined, 'a class instance is not snapshotted');
  t.equal(serializeState({ f: () => 1 }), undefined, 'a function is not snapshotted');
});
