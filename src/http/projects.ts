import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { type ActiveOrg, orgDecider, orgStream } from '../../commands/org.ts';
import { cascadeProjectDeletion, ProjectCascadeReactor } from '../reactors/project-cascade.ts';
import { PROJECTS_LIST_DEFAULT, PROJECTS_LIST_MAX } from '../limits.ts';
import { ApiError, forbidden } from './errors.ts';
import { newId } from './ids.ts';
import { projectView } from './orgs.ts';
import { defineRoute, READ_SIDE_HEADER, type AppDeps } from './route.ts';
import { IdParam, Project, QueryBool, Timestamp } from './schemas.ts';
import { ROLE_RANK, type Role, type ServiceAuth } from './auth.ts';

// The projects family (spec 4.2), members included. Reads come from the
// projects read model; writes are decided in the organization's stream.

const PROJECT_COLUMNS = `id, org_id, name, slug, is_default, environment, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created_at`;

const notFound = () => new ApiError(404, 'not_found', 'project not found');

const Member = z
  .object({
    user_id: z.string(),
    role: z.enum(['owner', 'admin', 'member']),
    source: z.enum(['org', 'project']),
    email: z.string(),
    display_name: z.string().nullable(),
    avatar_url: z.string().nullable(),
    added_at: Timestamp,
  })
  .meta({ id: 'ProjectMember' });

async function projectOf(deps: AppDeps, orgId: string, id: string): Promise<z.infer<typeof Project> | undefined> {
  return (await deps.orgCache.get(`project-row:${orgId}:${id}`, async () => {
    const { rows } = await deps.db.query<z.infer<typeof Project>>(`SELECT ${PROJECT_COLUMNS} FROM projects WHERE org_id = $1 AND id = $2 AND deleted_at IS NULL`, [orgId, id]);
    return rows[0];
  })) as z.infer<typeof Project> | undefined;
}

/** A key bound to one project manages that project only (spec Part 5: "a project-scoped key managing another project answers 403 forbidden"). */
function mayManage(auth: { projectBound: boolean; projectId: string }, projectId: string | undefined): void {
  if (auth.projectBound && projectId !== auth.projectId) throw forbidden('this API key is bound to another project');
}

export async function projectRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  // The safety net of the deletion cascade (see DELETE below).
  const cascade = new ProjectCascadeReactor(deps, deps.now);
  cascade.start();
  app.addHook('onClose', () => cascade.stop());

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/projects',
    operationId: 'listProjects',
    summary: 'List projects; serves both described forms ({projects} and {data, total, limit, offset}) at once',
    tags: ['projects'],
    auth: 'api_key',
    scope: 'projects:read',
    query: z.object({
      is_default: QueryBool.optional(),
      limit: z.coerce.number().int().min(1).max(PROJECTS_LIST_MAX).default(PROJECTS_LIST_DEFAULT),
      offset: z.coerce.number().int().min(0).max(1_000_000).default(0),
    }),
    responses: { 200: z.object({ projects: z.array(Project), data: z.array(Project), total: z.number().int(), limit: z.number().int(), offset: z.number().int() }) },
    errors: [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth, query, deps }) {
      const filter = query.is_default === undefined ? '' : ' AND is_default = $4';
      const params: unknown[] = [auth.orgId, query.limit, query.offset];
      if (query.is_default !== undefined) params.push(query.is_default);
      const { rows } = await deps.db.query<z.infer<typeof Project> & { total: string }>(
        `SELECT ${PROJECT_COLUMNS}, count(*) OVER ()::text AS total FROM projects WHERE org_id = $1 AND deleted_at IS NULL${filter}
         ORDER BY created_at, id LIMIT $2 OFFSET $3`,
        params,
      );
      let total = rows[0] ? Number(rows[0].total) : 0;
      if (!rows[0] && query.offset > 0) {
        const c = await deps.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM projects WHERE org_id = $1 AND deleted_at IS NULL${filter.replace('$4', '$2')}`, query.is_default === undefined ? [auth.orgId] : [auth.orgId, query.is_default]);
        total = Number(c.rows[0]!.n);
      }
      const projects = rows.map(({ total: _t, ...p }) => p);
      return { status: 200, body: { projects, data: projects, total, limit: query.limit, offset: query.offset } };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/projects',
    operationId: 'createProject',
    summary: 'Create a project (never the default)',
    tags: ['projects'],
    auth: 'api_key',
    scope: 'projects:write',
    body: z.object({
      name: z.string().trim().min(1).max(200),
      slug: z.string(),
      environment: z.enum(['live', 'test']).optional(),
      settings: z.record(z.string(), z.unknown()).optional(),
    }),
    responses: { 201: Project },
    errors: [[400, 'invalid_body'], [400, 'slug_invalid'], [400, 'slug_reserved'], [400, 'slug_conflict'], [401, 'unauthorized'], [403, 'forbidden']],
    idempotent: true,
    authorize: ({ auth }) => mayManage(auth, undefined),
    async handler({ auth, body, run }) {
      const projectId = newId('prj');
      const r = await run(orgDecider, orgStream(auth.orgId), {
        type: 'create_project',
        projectId,
        name: body.name,
        slug: body.slug,
        environment: body.environment ?? auth.environment,
        settings: body.settings ?? {},
      });
      return { status: 201, body: projectView(auth.orgId, projectId, r.state as ActiveOrg) };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/projects/:id',
    operationId: 'getProject',
    summary: 'Read a project',
    tags: ['projects'],
    auth: 'api_key',
    scope: 'projects:read',
    params: z.object({ id: IdParam }),
    responses: { 200: Project },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler({ auth, params, deps }) {
      const p = await projectOf(deps, auth.orgId, params.id);
      if (!p) throw notFound();
      return { status: 200, body: p };
    },
  });

  defineRoute(app, deps, {
    method: 'PATCH',
    url: '/v1/projects/:id',
    operationId: 'updateProject',
    summary: 'Rename, reslug, or promote to default (is_default: true demotes the previous default in the same append)',
    tags: ['projects'],
    auth: 'api_key',
    scope: 'projects:write',
    params: z.object({ id: IdParam }),
    body: z.object({ name: z.string().trim().min(1).max(200).optional(), slug: z.string().optional(), is_default: z.boolean().optional() }),
    responses: { 200: Project },
    errors: [[400, 'invalid_body'], [400, 'slug_invalid'], [400, 'slug_reserved'], [400, 'slug_conflict'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    idempotent: true,
    authorize: ({ auth, params }) => mayManage(auth, params.id),
    async handler({ auth, params, body, run }) {
      const r = await run(orgDecider, orgStream(auth.orgId), {
        type: 'update_project',
        projectId: params.id,
        ...(body.name !== undefined ? { name: body.name } : {}),
        ...(body.slug !== undefined ? { slug: body.slug } : {}),
        makeDefault: body.is_default === true,
      });
      return { status: 200, body: projectView(auth.orgId, params.id, r.state as ActiveOrg) };
    },
  });

  defineRoute(app, deps, {
    method: 'DELETE',
    url: '/v1/projects/:id',
    operationId: 'deleteProject',
    summary: 'Delete a project (irreversible): its API keys are revoked in the same append; its connections (vault rows purged), webhook endpoints, sessions and their tool calls are deleted before the 200',
    tags: ['projects'],
    auth: 'api_key',
    scope: 'projects:write',
    params: z.object({ id: IdParam }),
    responses: { 200: z.object({ id: z.string(), deleted: z.literal(true) }) },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [409, 'cannot_delete_default'], [409, 'cannot_delete_last_project'], [409, 'cannot_delete_with_consumer_records'], [503, 'cascade_pending']],
    idempotent: true,
    authorize: ({ auth, params }) => mayManage(auth, params.id),
    async handler(ctx) {
      const { auth, params, run, deps, req } = ctx;
      // Consumer records live in their own streams; a project holding any keeps
      // them reachable, so it cannot be deleted (checked on the read model, which
      // the consumer's own creation waited for).
      const held = await deps.db.query('SELECT 1 FROM consumers WHERE org_id = $1 AND project_id = $2 LIMIT 1', [auth.orgId, params.id]);
      if (held.rowCount > 0 && (await projectOf(deps, auth.orgId, params.id))) {
        throw new ApiError(409, 'cannot_delete_with_consumer_records', 'the project holds consumer records; it cannot be deleted');
      }
      await run(orgDecider, orgStream(auth.orgId), { type: 'delete_project', projectId: params.id });
      // The cascade beyond the organization's stream (connections, webhook endpoints,
      // sessions with their tool calls), done before answering: a 200 means it is
      // done and visible. A crash or failure meanwhile leaves it to the reactor.
      try {
        await cascadeProjectDeletion(deps, ctx.run.bind(ctx), auth.orgId, params.id);
      } catch (err) {
        req.log.warn({ project_id: params.id, reason: err instanceof Error ? err.constructor.name : 'error' }, 'project cascade left to the reactor');
        throw new ApiError(503, 'cascade_pending', 'the project is deleted; removing its records did not finish and continues in the background', { retriable: false, project_id: params.id });
      }
      // The reactor may have appended some of the deletions meanwhile (then our own command
      // appended nothing and waited for nothing): wait for the read side to hold the whole log.
      if (!(await deps.readSide.waitFor(await deps.store.headPosition(), deps.readWaitMs))) ctx.reply.header(READ_SIDE_HEADER, 'behind');
      return { status: 200, body: { id: params.id, deleted: true } };
    },
  });

  // Members: service auth (platform secret + x-svc-user).

  const ProjectParams = z.object({ id: IdParam });
  const MemberParams = z.object({ id: IdParam, user_id: IdParam });
  const memberErrors = [[401, 'unauthorized'], [403, 'insufficient_role'], [404, 'not_found'], [404, 'user_not_in_org'], [409, 'cannot_override_owner']] as const;

  async function requireProject(orgId: string, id: string) {
    if (!(await projectOf(deps, orgId, id))) throw notFound();
  }

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/projects/:id/members',
    operationId: 'listProjectMembers',
    summary: 'Members with their effective role: owner, admin, member; oldest first within a tier',
    tags: ['projects'],
    auth: 'service',
    params: ProjectParams,
    responses: { 200: z.object({ members: z.array(Member) }) },
    // Any member of the organization may read the list: no role refusal.
    errors: [[401, 'unauthorized'], [404, 'not_found']],
    async handler({ auth, params, deps }) {
      await requireProject(auth.orgId, params.id);
      const { rows } = await deps.db.query<z.infer<typeof Member>>(
        `SELECT u.user_id,
                CASE WHEN u.role = 'owner' THEN 'owner' ELSE coalesce(pm.role, u.role) END AS role,
                CASE WHEN pm.role IS NOT NULL AND u.role <> 'owner' THEN 'project' ELSE 'org' END AS source,
                u.email, u.display_name, NULL AS avatar_url,
                to_char(CASE WHEN pm.role IS NOT NULL AND u.role <> 'owner' THEN pm.added_at ELSE u.added_at END AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS added_at
         FROM users u
         LEFT JOIN project_members pm ON pm.user_id = u.user_id AND pm.project_id = $2 AND NOT pm.removed
         WHERE u.org_id = $1`,
        [auth.orgId, params.id],
      );
      const rank = (r: Role) => 3 - ROLE_RANK[r];
      rows.sort((a, b) => rank(a.role) - rank(b.role) || a.added_at.localeCompare(b.added_at) || a.user_id.localeCompare(b.user_id));
      return { status: 200, body: { members: rows } };
    },
  });

  // Admin in the project (an override there raises or narrows the organization role), judged before the body is read;
  // a member gets 403 for a project that does not exist too, an admin 404.
  const requireAdmin = (auth: ServiceAuth, projectId: string) => deps.auth.requireRoleIn(auth, projectId, 'admin');

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/projects/:id/members',
    operationId: 'upsertProjectMember',
    summary: "Set a user's role override in the project (upsert; account admin or owner)",
    tags: ['projects'],
    auth: 'service',
    params: ProjectParams,
    body: z.object({ user_id: z.string().min(1), role: z.enum(['admin', 'member']) }),
    responses: { 200: z.object({ project_id: z.string(), user_id: z.string(), role: z.enum(['admin', 'member']), changed: z.boolean() }) },
    errors: [[400, 'invalid_body'], ...memberErrors],
    idempotent: true,
    authorize: ({ auth, params }) => requireAdmin(auth, params.id!),
    async handler({ auth, params, body, run }) {
      await requireProject(auth.orgId, params.id);
      const r = await run(orgDecider, orgStream(auth.orgId), { type: 'set_project_member', projectId: params.id, userId: body.user_id, role: body.role });
      return { status: 200, body: { project_id: params.id, user_id: body.user_id, role: body.role, changed: r.changed } };
    },
  });

  defineRoute(app, deps, {
    method: 'PATCH',
    url: '/v1/projects/:id/members/:user_id',
    operationId: 'updateProjectMember',
    summary: "Change a user's role override (404 when the user has no override)",
    tags: ['projects'],
    auth: 'service',
    params: MemberParams,
    body: z.object({ role: z.enum(['admin', 'member']) }),
    responses: { 200: z.object({ project_id: z.string(), user_id: z.string(), role: z.enum(['admin', 'member']), changed: z.boolean() }) },
    errors: [[400, 'invalid_body'], ...memberErrors],
    idempotent: true,
    authorize: ({ auth, params }) => requireAdmin(auth, params.id!),
    async handler({ auth, params, body, run, deps }) {
      await requireProject(auth.orgId, params.id);
      const { rows } = await deps.db.query('SELECT 1 FROM project_members WHERE project_id = $1 AND user_id = $2 AND NOT removed', [params.id, params.user_id]);
      if (rows.length === 0) throw new ApiError(404, 'not_found', 'this user has no role override in the project');
      const r = await run(orgDecider, orgStream(auth.orgId), { type: 'set_project_member', projectId: params.id, userId: params.user_id, role: body.role });
      return { status: 200, body: { project_id: params.id, user_id: params.user_id, role: body.role, changed: r.changed } };
    },
  });

  defineRoute(app, deps, {
    method: 'DELETE',
    url: '/v1/projects/:id/members/:user_id',
    operationId: 'removeProjectMember',
    summary: "Remove a user's role override (204 even when there is none)",
    tags: ['projects'],
    auth: 'service',
    params: MemberParams,
    responses: { 204: null },
    errors: memberErrors,
    idempotent: true,
    authorize: ({ auth, params }) => requireAdmin(auth, params.id!),
    async handler({ auth, params, run }) {
      await requireProject(auth.orgId, params.id);
      await run(orgDecider, orgStream(auth.orgId), { type: 'remove_project_member', projectId: params.id, userId: params.user_id });
      return { status: 204 };
    },
  });
}
