import type { z } from 'zod';
import { policySetDecider, policiesStream, type PolicyFields } from '../../commands/policy.ts';
import type { PolicyType } from '../../events/policy.ts';
import { Rejection } from '../eventstore/handler.ts';
import { newId } from '../ids.ts';
import { CONFIG_SCHEMAS } from '../policy/config.ts';
import { isoText as TS } from '../postgres/iso-text.ts';
import type { Ports, RunCommand } from './context.ts';

// Policies (spec 4.11): per organization, ordered; every change is an event in
// the organization's policy stream, which the engine folds on every
// evaluation (so an acknowledged change is enforced by the next request on any instance).

type Type = z.infer<typeof PolicyType>;
export type PolicyRow = { id: string; name: string; type: Type; config: Record<string, unknown>; agents: string[]; tools: string[]; enabled: boolean; ord: number; created_at: string; updated_at: string };
type Ctx = { ports: Ports; run: RunCommand; orgId: string };

const COLUMNS = `id, name, type, config, agents, tools, enabled, ord, ${TS('created_at')} AS created_at, ${TS('updated_at')} AS updated_at`;

/** A config checked against its type: the parsed form (defaults applied) or invalid_body with the issues under `config`. */
function checkedConfig(type: Type, config: unknown): Record<string, unknown> {
  const r = CONFIG_SCHEMAS[type].safeParse(config ?? {});
  if (!r.success) {
    const issues = r.error.issues.map((i) => ({ path: ['config', ...i.path].map((p) => (typeof p === 'number' ? p : String(p))), code: i.code ?? 'invalid', message: i.message }));
    throw new Rejection('invalid_body', `the config does not fit a ${type} policy`, { issues });
  }
  return r.data as Record<string, unknown>;
}

/** The organization's policies in evaluation order. */
export async function listPolicies(ports: Ports, orgId: string): Promise<PolicyRow[]> {
  return (await ports.db.query<PolicyRow>(`SELECT ${COLUMNS} FROM policies WHERE org_id = $1 ORDER BY ord, policies.created_at, id`, [orgId])).rows;
}

/** One of the organization's policies, or the rejection not_found. */
export async function getPolicy(ports: Ports, orgId: string, id: string): Promise<PolicyRow> {
  const r = (await ports.db.query<PolicyRow>(`SELECT ${COLUMNS} FROM policies WHERE org_id = $1 AND id = $2`, [orgId, id])).rows[0];
  if (!r) throw new Rejection('not_found', 'policy not found');
  return r;
}

export type NewPolicy = { name: string; type: Type; config?: unknown; agents?: string[] | undefined; tools?: string[] | undefined; enabled?: boolean | undefined };

/** Adds a policy at the end of the order. */
export async function createPolicy(c: Ctx, b: NewPolicy): Promise<PolicyRow> {
  const id = newId('pol');
  const fields: PolicyFields = { name: b.name, type: b.type, config: checkedConfig(b.type, b.config), agents: b.agents ?? [], tools: b.tools ?? [], enabled: b.enabled ?? true };
  await c.run(policySetDecider, policiesStream(c.orgId), { type: 'create', orgId: c.orgId, policyId: id, fields }, { serialize: true });
  return getPolicy(c.ports, c.orgId, id);
}

/** Puts the listed policies first, in this order; atomic (an id not of this organization moves nothing). */
export async function reorderPolicies(c: Ctx, ids: string[]): Promise<void> {
  await c.run(policySetDecider, policiesStream(c.orgId), { type: 'reorder', orgId: c.orgId, ids }, { serialize: true });
}

/** Changes a policy; a new type or a new config is checked as the pair the policy will hold. */
export async function updatePolicy(c: Ctx, id: string, body: Partial<PolicyFields>): Promise<PolicyRow> {
  const current = await getPolicy(c.ports, c.orgId, id);
  const changes: Partial<PolicyFields> = { ...body };
  if (body.type !== undefined || body.config !== undefined) {
    const type = body.type ?? current.type;
    changes.config = checkedConfig(type, body.config ?? (body.type !== undefined && body.type !== current.type ? {} : current.config));
  }
  await c.run(policySetDecider, policiesStream(c.orgId), { type: 'update', policyId: id, changes }, { serialize: true });
  return getPolicy(c.ports, c.orgId, id);
}

export async function deletePolicy(c: Ctx, id: string): Promise<void> {
  await c.run(policySetDecider, policiesStream(c.orgId), { type: 'delete', policyId: id }, { serialize: true });
}
