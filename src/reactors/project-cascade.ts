import { connectionDecider, connectionStream } from '../../commands/connection.ts';
import type { Tenant } from '../../commands/consumer.ts';
import { sessionDecider, sessionQuotaDecider, sessionQuotaStream, sessionStream } from '../../commands/session.ts';
import { webhookDecider, webhookStream } from '../../commands/webhook.ts';
import { handleCommand, loadState } from '../eventstore/handler.ts';
import type { EventStore } from '../eventstore/port.ts';
import type { Vault } from '../adapters/vault.ts';
import type { Db } from '../postgres/db.ts';
import { deleteConnection } from '../usecases/connections.ts';
import type { RunCommand } from '../usecases/context.ts';
import { deleteWebhookEndpoint } from '../usecases/webhook-endpoints.ts';
import { PeriodicReactor } from './periodic.ts';

// The cascade of a deleted project beyond the organization's stream (whose
// append revokes the project's API keys with `project.deleted`): its
// connections (vault rows purged, slot released), its webhook endpoints
// ("triggers", signing secrets purged) and its sessions with their tool-call
// history (`session.deleted`; the read side drops the session and its calls;
// its quota claim is released). One function, run by DELETE /v1/projects/{id}
// before it answers and by this reactor, which sweeps deleted projects that
// still hold records: after a crash between the organization's append and the
// end of the request's cascade, the sweep finishes it. Every step is idempotent
// (deleting a deleted record appends nothing), so both may run it, in any
// number of processes. Only records of that organization and project are read.

export type CascadeDeps = { db: Db; store: EventStore; vault: Vault };

const BATCH = 200;

/**
 * Deletes what the read side still lists of the project's connections, webhook
 * endpoints and sessions. Call it only for a project whose `project.deleted` is
 * in the log. Answers how many records it deleted; throws on the first failure
 * (a vault that cannot purge), leaving the rest to a later run.
 */
export async function cascadeProjectDeletion(deps: CascadeDeps, run: RunCommand, orgId: string, projectId: string): Promise<number> {
  const tenant: Tenant = { orgId, projectId };
  const opts = { orgId, projectId };
  let deleted = 0;
  for (;;) {
    let round = 0;
    const connections = await deps.db.query<{ id: string }>(`SELECT id FROM connections WHERE org_id = $1 AND project_id = $2 ORDER BY id LIMIT ${BATCH}`, [orgId, projectId]);
    for (const { id } of connections.rows) {
      const { state } = await loadState(deps.store, connectionStream(id), connectionDecider);
      if (state.status !== 'exists' || state.c.orgId !== orgId || state.c.projectId !== projectId) continue; // deleted already; the read side follows
      await deleteConnection(deps, run, tenant, state.c);
      round++;
    }
    const endpoints = await deps.db.query<{ id: string }>(`SELECT id FROM webhook_endpoints WHERE org_id = $1 AND project_id = $2 AND NOT deleted ORDER BY id LIMIT ${BATCH}`, [orgId, projectId]);
    for (const { id } of endpoints.rows) {
      const { state } = await loadState(deps.store, webhookStream(id), webhookDecider);
      if (state.status !== 'exists' || state.e.orgId !== orgId || state.e.projectId !== projectId) continue;
      await deleteWebhookEndpoint(deps, run, tenant, state.e);
      round++;
    }
    const sessions = await deps.db.query<{ id: string }>(`SELECT id FROM sessions WHERE org_id = $1 AND project_id = $2 ORDER BY id LIMIT ${BATCH}`, [orgId, projectId]);
    for (const { id } of sessions.rows) {
      const r = await run(sessionDecider, sessionStream(id), { type: 'delete', tenant, reason: 'project_deleted' }, { ...opts, serialize: true });
      await run(sessionQuotaDecider, sessionQuotaStream(orgId), { type: 'release', sessionId: id }, { ...opts, serialize: true });
      if (r.changed) round++;
    }
    deleted += round;
    // Another round only when a batch was full and this one moved something (the read side has caught up with it).
    const full = [connections, endpoints, sessions].some((q) => q.rows.length === BATCH);
    if (!full || round === 0) return deleted;
  }
}

/** The safety net: finishes the cascade of every deleted project that still holds records. */
export class ProjectCascadeReactor extends PeriodicReactor {
  constructor(
    private readonly deps: CascadeDeps,
    private readonly now: () => Date,
    intervalMs = 1_000,
  ) {
    super(intervalMs);
  }

  protected async pass(): Promise<number> {
    const { rows } = await this.deps.db
      .query<{ org_id: string; id: string }>(
        `SELECT p.org_id, p.id FROM projects p WHERE p.deleted_at IS NOT NULL AND (
           EXISTS (SELECT 1 FROM connections c WHERE c.org_id = p.org_id AND c.project_id = p.id)
           OR EXISTS (SELECT 1 FROM webhook_endpoints w WHERE w.org_id = p.org_id AND w.project_id = p.id AND NOT w.deleted)
           OR EXISTS (SELECT 1 FROM sessions s WHERE s.org_id = p.org_id AND s.project_id = p.id))
         ORDER BY p.deleted_at LIMIT 50`,
      )
      .catch(() => ({ rows: [] as { org_id: string; id: string }[] })); // a read side without these tables: nothing to sweep
    let moved = 0;
    for (const p of rows) {
      const run: RunCommand = (decider, stream, command, opts = {}) =>
        handleCommand(this.deps.store, decider, stream, command, { orgId: p.org_id, projectId: p.id, actor: { kind: 'system', id: 'project-cascade' }, requestId: null, now: this.now }, opts);
      // One project's failure (a vault that cannot purge) does not hold up the others; the next pass retries it.
      moved += await cascadeProjectDeletion(this.deps, run, p.org_id, p.id).catch(() => 0);
    }
    return moved;
  }
}
