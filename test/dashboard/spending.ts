import type { FastifyInstance } from 'fastify';
import { bootstrapOrg } from '../helpers/app.ts';

// What the dashboard's page tests start from: an organization whose agent
// spends for a consumer under a BRL mandate (100 000 cap, a day long), made
// through /v1 with the organization's key as an application would.

export type V1 = (method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>) => Promise<{ status: number; body: any }>;

export async function spendingOrg(app: FastifyInstance, name: string, agentId = 'buyer') {
  const org = await bootstrapOrg(app, name);
  const v1: V1 = async (method, url, payload) => {
    const r = await app.inject({ method, url, headers: org.key, ...(payload ? { payload } : {}) });
    return { status: r.statusCode, body: r.json() };
  };
  /** A POST that must answer 2xx: its body. */
  const post = async (url: string, payload: Record<string, unknown>) => {
    const r = await v1('POST', url, payload);
    if (r.status >= 300) throw new Error(`${url} answered ${r.status}: ${JSON.stringify(r.body)}`);
    return r.body;
  };
  await post('/v1/agents', { agent_id: agentId, principal_ref: 'p' });
  const consumer = await post('/v1/consumers', { display_name: 'Ana' });
  const mandate = await post('/v1/mandates', {
    consumer_id: consumer.id,
    agent_id: agentId,
    purpose: 'groceries',
    merchant_allowlist: ['market'],
    merchant_pin_kind: 'merchant-id',
    cap_minor: '100000',
    per_tx_cap_minor: '100000',
    currency: 'BRL',
    expires_at: Math.floor(Date.now() / 1000) + 86_400,
  });
  /** A spend of the agent at the market (its answer, whatever the status). */
  const spend = (amount: string) => v1('POST', `/v1/consumers/mandates/${mandate.id}/spend`, { amount_minor: amount, currency: 'BRL', merchant: 'market' });
  return { org, v1, post, consumer, mandate, spend };
}
