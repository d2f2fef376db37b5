import { orgDecider, orgStream, type Role } from '../../commands/org.ts';
import type { Queryable } from '../postgres/db.ts';
import { isoText } from '../postgres/iso-text.ts';
import type { RunCommand } from './context.ts';

// The team of an organization as the dashboard's Team page runs it: the
// members with their organization role and their role in one project, a role
// changed, a member removed. The refusals are the decider's (only an owner
// makes or unmakes an owner; the last owner stays), the role a person needs
// is the HTTP API's (admin or owner of the organization; in a project, admin
// there).

export type TeamRow = { user_id: string; email: string; display_name: string | null; org_role: Role; project_role: Role; override: boolean; added_at: string };

/** The organization's users with their role in `projectId` (an override, else their organization role; owners are owners everywhere), owners first. */
export async function listTeam(db: Queryable, orgId: string, projectId: string): Promise<TeamRow[]> {
  const { rows } = await db.query<TeamRow>(
    `SELECT u.user_id, u.email, u.display_name, u.role AS org_role,
            CASE WHEN u.role = 'owner' THEN 'owner' ELSE coalesce(pm.role, u.role) END AS project_role,
            (pm.role IS NOT NULL AND u.role <> 'owner') AS override,
            ${isoText('u.added_at')} AS added_at
     FROM users u
     LEFT JOIN project_members pm ON pm.user_id = u.user_id AND pm.project_id = $2 AND NOT pm.removed
     WHERE u.org_id = $1
     ORDER BY CASE u.role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 ELSE 2 END, u.added_at, u.user_id`,
    [orgId, projectId],
  );
  return rows;
}

/** A person's role in a project: theirs in the organization when they own it or have no override there. */
export async function roleInProject(db: Queryable, userId: string, orgRole: Role, projectId: string): Promise<Role> {
  if (orgRole === 'owner') return 'owner';
  const { rows } = await db.query<{ role: Role }>('SELECT role FROM project_members WHERE project_id = $1 AND user_id = $2 AND NOT removed', [projectId, userId]);
  return rows[0]?.role ?? orgRole;
}

export async function changeMemberRole(run: RunCommand, orgId: string, userId: string, role: Role, actorRole: Role): Promise<{ changed: boolean }> {
  const r = await run(orgDecider, orgStream(orgId), { type: 'change_user_role', userId, role, actorRole });
  return { changed: r.changed };
}

export async function removeMember(run: RunCommand, orgId: string, userId: string, actorRole: Role): Promise<void> {
  await run(orgDecider, orgStream(orgId), { type: 'remove_user', userId, actorRole });
}
