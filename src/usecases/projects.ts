import { type ActiveOrg, orgDecider, orgStream } from '../../commands/org.ts';
import { Rejection } from '../eventstore/handler.ts';
import { newId } from '../ids.ts';
import { isoText } from '../postgres/iso-text.ts';
import { cascadeProjectDeletion } from '../reactors/project-cascade.ts';
import type { Ports, RunCommand } from './context.ts';

// The projects family (spec 4.2), members included. Reads come from the
// projects read model; writes are decided in the organization's stream.

export type ProjectRow = { id: string; org_id: string; name: string; slug: string; is_default: boolean; environment: 'live' | 'test'; created_at: string };
const PROJECT_COLUMNS = `id, org_id, name, slug, is_default, environment, ${isoText('created_at')} AS created_at`;

/** A project as the organization's folded state has it (right after a write). */
export function projectView(orgId: string, id: string, s: ActiveOrg): ProjectRow {
  const p = s.projects.get(id)!;
  return { id, org_id: orgId, name: p.name, slug: p.slug, is_default: p.isDefault, environment: p.environment, created_at: p.createdAt };
}

/** A live project of the organization from the read model (cached while the organization's read model has not moved). */
export async function readProject(ports: Pick<Ports, 'db' | 'orgCache'>, orgId: string, id: string): Promise<ProjectRow | undefined> {
  return (await ports.orgCache.get(`project-row:${orgId}:${id}`, async () => {
    const { rows } = await ports.db.query<ProjectRow>(`SELECT ${PROJECT_COLUMNS} FROM projects WHERE org_id = $1 AND id = $2 AND deleted_at IS NULL`, [orgId, id]);
    return rows[0];
  })) as ProjectRow | undefined;
}

/** A live project of the organization, or `not_found`. */
export async function requireProject(ports: Pick<Ports, 'db' | 'orgCache'>, orgId: string, id: string): Promise<ProjectRow> {
  const p = await readProject(ports, orgId, id);
  if (!p) throw new Rejection('not_found', 'project not found');
  return p;
}

/** A page of the organization's projects, oldest first, with the total. */
export async function listProjects(ports: Pick<Ports, 'db'>, orgId: string, q: { is_default?: boolean | undefined; limit: number; offset: number }): Promise<{ projects: ProjectRow[]; total: number }> {
  const filter = q.is_default === undefined ? '' : ' AND is_default = $4';
  const params: unknown[] = [orgId, q.limit, q.offset];
  if (q.is_default !== undefined) params.push(q.is_default);
  const { rows } = await ports.db.query<ProjectRow & { total: string }>(
    `SELECT ${PROJECT_COLUMNS}, count(*) OVER ()::text AS total FROM projects WHERE org_id = $1 AND deleted_at IS NULL${filter}
     ORDER BY projects.created_at, id LIMIT $2 OFFSET $3`,
    params,
  );
  let total = rows[0] ? Number(rows[0].total) : 0;
  if (!rows[0] && q.offset > 0) {
    const c = await ports.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM projects WHERE org_id = $1 AND deleted_at IS NULL${filter.replace('$4', '$2')}`, q.is_default === undefined ? [orgId] : [orgId, q.is_default]);
    total = Number(c.rows[0]!.n);
  }
  return { projects: rows.map(({ total: _t, ...p }) => p), total };
}

export async function createProject(run: RunCommand, orgId: string, body: { name: string; slug: string; environment: 'live' | 'test'; settings: Record<string, unknown> }): Promise<ProjectRow> {
  const projectId = newId('prj');
  const r = await run(orgDecider, orgStream(orgId), { type: 'create_project', projectId, name: body.name, slug: body.slug, environment: body.environment, settings: body.settings });
  return projectView(orgId, projectId, r.state as ActiveOrg);
}

export async function updateProject(run: RunCommand, orgId: string, projectId: string, body: { name?: string | undefined; slug?: string | undefined; is_default?: boolean | undefined }): Promise<ProjectRow> {
  const r = await run(orgDecider, orgStream(orgId), {
    type: 'update_project',
    projectId,
    ...(body.name !== undefined ? { name: body.name } : {}),
    ...(body.slug !== undefined ? { slug: body.slug } : {}),
    makeDefault: body.is_default === true,
  });
  return projectView(orgId, projectId, r.state as ActiveOrg);
}

/**
 * Deletes a project: its API keys are revoked in the organization's append,
 * then its connections, webhook endpoints and sessions are deleted before
 * answering (a failure meanwhile is `cascade_pending`, left to the reactor;
 * `onCascadeFailure` hears why). Answers whether the read side holds the whole
 * log (the reactor may have appended some of the deletions meanwhile).
 */
export async function deleteProject(ports: Pick<Ports, 'db' | 'orgCache' | 'store' | 'vault' | 'readSide' | 'readWaitMs'>, run: RunCommand, orgId: string, projectId: string, onCascadeFailure: (reason: string) => void): Promise<{ caughtUp: boolean }> {
  // Consumer records live in their own streams; a project holding any keeps
  // them reachable, so it cannot be deleted (checked on the read model, which
  // the consumer's own creation waited for).
  const held = await ports.db.query('SELECT 1 FROM consumers WHERE org_id = $1 AND project_id = $2 LIMIT 1', [orgId, projectId]);
  if (held.rowCount > 0 && (await readProject(ports, orgId, projectId))) {
    throw new Rejection('cannot_delete_with_consumer_records', 'the project holds consumer records; it cannot be deleted');
  }
  await run(orgDecider, orgStream(orgId), { type: 'delete_project', projectId });
  // The cascade beyond the organization's stream (connections, webhook endpoints,
  // sessions with their tool calls), done before answering: a 200 means it is
  // done and visible. A crash or failure meanwhile leaves it to the reactor.
  try {
    await cascadeProjectDeletion(ports, run, orgId, projectId);
  } catch (err) {
    onCascadeFailure(err instanceof Error ? err.constructor.name : 'error');
    throw new Rejection('cascade_pending', 'the project is deleted; removing its records did not finish and continues in the background', { retriable: false, project_id: projectId });
  }
  return { caughtUp: await ports.readSide.waitFor(await ports.store.headPosition(), ports.readWaitMs) };
}

export type MemberRow = { user_id: string; role: 'owner' | 'admin' | 'member'; source: 'org' | 'project'; email: string; display_name: string | null; avatar_url: string | null; added_at: string };
const TIER: Record<MemberRow['role'], number> = { owner: 0, admin: 1, member: 2 };

/** Members with their effective role: owner, admin, member; oldest first within a tier. */
export async function listProjectMembers(ports: Pick<Ports, 'db' | 'orgCache'>, orgId: string, projectId: string): Promise<MemberRow[]> {
  await requireProject(ports, orgId, projectId);
  const { rows } = await ports.db.query<MemberRow>(
    `SELECT u.user_id,
            CASE WHEN u.role = 'owner' THEN 'owner' ELSE coalesce(pm.role, u.role) END AS role,
            CASE WHEN pm.role IS NOT NULL AND u.role <> 'owner' THEN 'project' ELSE 'org' END AS source,
            u.email, u.display_name, NULL AS avatar_url,
            ${isoText(`CASE WHEN pm.role IS NOT NULL AND u.role <> 'owner' THEN pm.added_at ELSE u.added_at END`)} AS added_at
     FROM users u
     LEFT JOIN project_members pm ON pm.user_id = u.user_id AND pm.project_id = $2 AND NOT pm.removed
     WHERE u.org_id = $1`,
    [orgId, projectId],
  );
  rows.sort((a, b) => TIER[a.role] - TIER[b.role] || a.added_at.localeCompare(b.added_at) || a.user_id.localeCompare(b.user_id));
  return rows;
}

/** Sets a user's role override in the project (upsert); `onlyExisting` refuses (not_found) a user without one. */
export async function setProjectMember(ports: Pick<Ports, 'db' | 'orgCache'>, run: RunCommand, orgId: string, projectId: string, userId: string, role: 'admin' | 'member', onlyExisting = false): Promise<{ changed: boolean }> {
  await requireProject(ports, orgId, projectId);
  if (onlyExisting) {
    const { rows } = await ports.db.query('SELECT 1 FROM project_members WHERE project_id = $1 AND user_id = $2 AND NOT removed', [projectId, userId]);
    if (rows.length === 0) throw new Rejection('not_found', 'this user has no role override in the project');
  }
  const r = await run(orgDecider, orgStream(orgId), { type: 'set_project_member', projectId, userId, role });
  return { changed: r.changed };
}

/** Removes a user's role override (nothing to remove is no error). */
export async function removeProjectMember(ports: Pick<Ports, 'db' | 'orgCache'>, run: RunCommand, orgId: string, projectId: string, userId: string): Promise<void> {
  await requireProject(ports, orgId, projectId);
  await run(orgDecider, orgStream(orgId), { type: 'remove_project_member', projectId, userId });
}
