import type { Test } from 'tap';
import type { DomainEvent } from '../../events/index.ts';
import { type Decider, Rejection } from '../../src/eventstore/handler.ts';

// Given/when/then over a decider: pure, no database.
//   given(t, decider, [events]).when(command).then([events])
//   given(t, decider, [events]).when(command).rejects('code')

export function given<S, C>(t: Test, decider: Decider<S, C>, history: DomainEvent[], now = '2026-11-21T12:00:00.000Z') {
  const state = history.reduce(decider.evolve, decider.initialState());
  return {
    when(command: C) {
      const run = () => decider.decide(command, state, { now });
      return {
        then(expected: DomainEvent[], msg?: string) {
          t.same(run(), expected, msg ?? 'decided events');
        },
        rejects(code: string, msg?: string) {
          try {
            const got = run();
            t.fail(`${msg ?? code}: expected rejection ${code}, got ${JSON.stringify(got)}`);
          } catch (err) {
            t.ok(err instanceof Rejection, `${msg ?? code}: a Rejection`);
            t.equal((err as Rejection).code, code, msg ?? code);
          }
        },
      };
    },
  };
}
