import { randomBytes } from 'node:crypto';
import { Vault } from '../src/adapters/vault.ts';
import { buildApp } from '../src/app.ts';
import type { PostgresEventStore } from '../src/eventstore/postgres.ts';
import type { Db } from '../src/postgres/db.ts';
import type { startReadSide } from '../src/readside.ts';

// One organization, one API key, one agent and one consumer, through the app
// (app.inject), with no rate limit: what the spend benches start from
// (bench/command-profile, bench/bytes-per-spend, bench/stream-length).
// `mandate(cap)` grants the agent a BRL mandate at a Pix key, `spendOn(id)`
// spends 0.01 under one.

export async function benchOrg(db: Db, store: PostgresEventStore, readSide: Awaited<ReturnType<typeof startReadSide>>) {
  const secret = 'svc_bench_secret_0123456789abcdefghijklmnop';
  const app = await buildApp({ vault: await Vault.open(db, randomBytes(32)), db, store, readSide, serviceSecret: secret, baseUrl: 'http://127.0.0.1', logLevel: 'warn', rateLimit: { burst: 1e9, perSecond: 1e9 } });
  const platform = { authorization: `Bearer ${secret}` };
  const org = (await app.inject({ method: 'POST', url: '/v1/orgs', headers: platform, payload: { name: 'Bench', owner_email: 'bench@example.com' } })).json();
  const key = (await app.inject({ method: 'POST', url: '/v1/api-keys', headers: { ...platform, 'x-svc-user': org.owner.user_id }, payload: { name: 'bench', environment: 'test' } })).json().key;
  const auth = { authorization: `Bearer ${key}` };
  await app.inject({ method: 'POST', url: '/v1/agents', headers: auth, payload: { agent_id: 'buyer', principal_ref: 'p' } });
  const consumer = (await app.inject({ method: 'POST', url: '/v1/consumers', headers: auth, payload: {} })).json();
  const mandate = async (capMinor: string): Promise<{ id: string }> =>
    (
      await app.inject({
        method: 'POST',
        url: '/v1/mandates',
        headers: auth,
        payload: { consumer_id: consumer.id, agent_id: 'buyer', purpose: 'bench', merchant_allowlist: ['shop@pix.example'], merchant_pin_kind: 'pix-key', cap_minor: capMinor, per_tx_cap_minor: '1000', currency: 'BRL', expires_at: Math.floor(Date.now() / 1000) + 86_400 },
      })
    ).json();
  const spendOn = (mandateId: string) => app.inject({ method: 'POST', url: `/v1/consumers/mandates/${mandateId}/spend`, headers: auth, payload: { amount_minor: '1', currency: 'BRL', merchant: 'shop@pix.example' } });
  return { app, auth, mandate, spendOn };
}

/** The spend benches' app with one mandate that has room for every spend they make. */
export async function spendApp(db: Db, store: PostgresEventStore, readSide: Awaited<ReturnType<typeof startReadSide>>) {
  const { app, mandate, spendOn } = await benchOrg(db, store, readSide);
  const m = await mandate('100000000');
  /** `n` spenders, each on a mandate of its own (concurrent spends on one mandate would conflict). */
  const spendMany = async (n: number) => Promise.all(Array.from({ length: n }, async () => {
    const own = await mandate('100000000');
    return () => spendOn(own.id);
  }));
  return { app, spend: () => spendOn(m.id), spendMany };
}
