import t, { type Test } from 'tap';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { serverFault } from '../helpers/fault.ts';
import { until } from '../helpers/wait.ts';

// An inline follower's work commits with the batch or not at all: a
// projection that writes an event's rows in several statements, each waiting
// for the one before (a spend inserts its authorization, then updates its
// mandate), must have all of them inside the transaction that moves its
// checkpoint. If the last one fails, the checkpoint must not claim the event.

/** A service with an organization, an agent and a consumer; mandates made on demand. */
async function service(t: Test, name: string) {
  const { app, ledger } = await testApp(t, { readWaitMs: 500 });
  const org = await bootstrapOrg(app, name);
  const post = (url: string, payload: Record<string, unknown> = {}) => app.inject({ method: 'POST', url, headers: org.key, payload });
  if ((await post('/v1/agents', { agent_id: 'buyer', principal_ref: 'p' })).statusCode !== 201) throw new Error('agent');
  const consumer = (await post('/v1/consumers')).json();
  const newMandate = async (purpose: string): Promise<{ id: string }> =>
    (await post('/v1/mandates', { consumer_id: consumer.id, agent_id: 'buyer', purpose, merchant_allowlist: ['shop@pix.example'], merchant_pin_kind: 'pix-key', cap_minor: '1000', per_tx_cap_minor: '300', currency: 'BRL', expires_at: Math.floor(Date.now() / 1000) + 3600 })).json();
  /** The log position of a mandate's last event, as checkpoints write it. */
  const lastPosition = async (mandateId: string) =>
    (await ledger.db.query<{ p: string }>(`SELECT max(position)::text AS p FROM es_events WHERE stream_name = $1`, [`mandate-${mandateId}`])).rows[0]!.p.padStart(20, '0');
  return { ledger, post, newMandate, lastPosition };
}

const { ledger, post, newMandate, lastPosition } = await service(t, 'Atomic');
const mandate = await newMandate('atomic');
const spend = () => post(`/v1/consumers/mandates/${mandate.id}/spend`, { amount_minor: '70', currency: 'BRL', merchant: 'shop@pix.example' });

const state = async () => {
  const cp = (await ledger.db.query<{ position: string; status: string }>(`SELECT position, status FROM checkpoints WHERE name = 'mandate'`)).rows[0]!;
  const m = (await ledger.db.query<{ spent_minor: string }>(`SELECT spent_minor::text FROM mandates WHERE id = $1`, [mandate.id])).rows[0]!;
  const auths = (await ledger.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM mandate_authorizations WHERE mandate_id = $1`, [mandate.id])).rows[0]!.n;
  return { cp, spent: m.spent_minor, auths };
};

t.test('one spend alone (its own batch): authorization and mandate move together with the checkpoint', async (t) => {
  // Warm: the next batch starts where this process's last one ended.
  t.equal((await spend()).statusCode, 201);
  const r = await spend();
  t.equal(r.statusCode, 201);
  const s = await until(async () => {
    const now = await state();
    return now.spent === '140' && now.auths === 2 ? now : undefined;
  }, 'both spends in the read model');
  t.equal(s.spent, '140');
  t.equal(s.auths, 2);
});

t.test('the mandate update refused: nothing of the spend’s rows is kept while the checkpoint claims it', async (t) => {
  const fault = await serverFault(ledger.db, 'mandates', 'UPDATE', 'mandate update fault (test)');
  t.teardown(() => fault.remove());
  const before = await state();
  const r = await spend();
  t.equal(r.statusCode, 201, 'the spend is recorded in the log');
  const position = await lastPosition(mandate.id);
  // Whatever the read side did meanwhile, the projection never claims the spend without its rows.
  const s = await state();
  if (s.cp.position >= position) {
    t.equal(s.spent, '210', 'a checkpoint past the spend has the mandate updated');
    t.equal(s.auths, before.auths + 1);
  } else {
    t.equal(s.spent, before.spent, 'not applied: the mandate as it was');
    t.equal(s.auths, before.auths, 'not applied: no authorization row either');
  }
  t.not(s.cp.position >= position && s.spent === before.spent, true, 'never: the checkpoint past the spend with the mandate unchanged');
  // With the fault gone the read side comes to the spend, rows and all.
  await fault.off();
  const after = await until(async () => {
    const now = await state();
    return (now.spent === '210' && now.auths === before.auths + 1) || now.cp.status === 'failed' ? now : undefined;
  }, 'the spend applied, or the projection stopped at it');
  if (after.cp.status === 'failed') t.ok(after.cp.position < position, 'stopped before the spend, its failure recorded (never past it silently)');
  else t.pass('applied once the fault was gone');
});

t.test('a projection that waits for an answer between its statements (a card: read the mandate, then insert the card) is answered before the COMMIT; refused, the checkpoint does not claim the event', async (t) => {
  // Its own service: the mandate projection above stopped at its fault.
  const { ledger, post, newMandate, lastPosition } = await service(t, 'Cards');
  // The read side running inline, each request its own batch.
  const warm = await newMandate('warm');
  t.ok((await post(`/v1/consumers/mandates/${warm.id}/card`)).statusCode < 300);
  await until(async () => (await ledger.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM mandate_cards WHERE mandate_id = $1`, [warm.id])).rows[0]!.n === 1, 'the card in the read model');
  t.pass('a card bound is in the read model');
  const other = await newMandate('card');
  const fault = await serverFault(ledger.db, 'mandate_cards', 'INSERT', 'card insert fault (test)');
  t.teardown(() => fault.remove());
  const r = await post(`/v1/consumers/mandates/${other.id}/card`);
  t.ok(r.statusCode < 300, `the card is bound in the log (${r.statusCode})`);
  const position = await lastPosition(other.id);
  const cards = async () => (await ledger.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM mandate_cards WHERE mandate_id = $1`, [other.id])).rows[0]!.n;
  const cp = (await ledger.db.query<{ position: string }>(`SELECT position FROM checkpoints WHERE name = 'mandate'`)).rows[0]!;
  t.notOk(cp.position >= position && (await cards()) === 0, 'never: the checkpoint past the card with no card row');
});
