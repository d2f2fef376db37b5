import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ProjectCascadeReactor } from '../reactors/project-cascade.ts';
import { PROJECTS_LIST_DEFAULT, PROJECTS_LIST_MAX } from '../limits.ts';
import { createProject, deleteProject, listProjectMembers, listProjects, removeProjectMember, requireProject, setProjectMember, updateProject } from '../usecases/projects.ts';
import { forbidden } from './kernel/errors.ts';
import { defineRoute, READ_SIDE_HEADER, type AppDeps } from './kernel/route.ts';
import { IdParam, Project, QueryBool, Timestamp } from './kernel/schemas.ts';
import type { ServiceAuth } from './kernel/auth.ts';

// The projects family (spec 4.2), members included: the routes; the use cases
// are src/usecases/projects.ts.

const Member = z
  .object({
    user_id: z.string(),
    role: z.enum(['owner', 'admin', 'member']),
    source: z.enum(['org', 'project']).describe("Where the role comes from: `org` (the person's organization role) or `project` (an override for this project)."),
    email: z.string(),
    display_name: z.string().nullable(),
    avatar_url: z.string().nullable(),
    added_at: Timestamp,
  })
  .meta({ id: 'ProjectMember' });

/** A key bound to one project manages that project only (spec Part 5: "a project-scoped key managing another project answers 403 forbidden"). */
function mayManage(auth: { projectBound: boolean; projectId: string }, projectId: string | undefined): void {
  if (auth.projectBound && projectId !== auth.projectId) throw forbidden('this API key is bound to another project');
}

export async function projectRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  // The safety net of the deletion cascade (see projectItemRoutes' DELETE).
  const cascade = new ProjectCascadeReactor(deps, deps.now);
  cascade.start();
  app.addHook('onClose', () => cascade.stop());

  projectCollectionRoutes(app, deps);
  projectItemRoutes(app, deps);
  projectMemberRoutes(app, deps);
}

/** The collection: list and create. */
function projectCollectionRoutes(app: FastifyInstance, deps: AppDeps): void {
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
      const { projects, total } = await listProjects(deps, auth.orgId, query);
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
      return { status: 201, body: await createProject(run, auth.orgId, { name: body.name, slug: body.slug, environment: body.environment ?? auth.environment, settings: body.settings ?? {} }) };
    },
  });
}

/** One project: read, update, delete. */
function projectItemRoutes(app: FastifyInstance, deps: AppDeps): void {
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
      return { status: 200, body: await requireProject(deps, auth.orgId, params.id) };
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
      return { status: 200, body: await updateProject(run, auth.orgId, params.id, body) };
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
      const { auth, params, req } = ctx;
      const warn = (reason: string) => req.log.warn({ project_id: params.id, reason }, 'project cascade left to the reactor');
      const { caughtUp } = await deleteProject(ctx.deps, ctx.run.bind(ctx), auth.orgId, params.id, warn);
      if (!caughtUp) ctx.reply.header(READ_SIDE_HEADER, 'behind');
      return { status: 200, body: { id: params.id, deleted: true } };
    },
  });
}

const ProjectParams = z.object({ id: IdParam });
const MemberParams = z.object({ id: IdParam, user_id: IdParam });
const memberErrors = [[401, 'unauthorized'], [403, 'insufficient_role'], [404, 'not_found'], [404, 'user_not_in_org'], [409, 'cannot_override_owner']] as const;

/** Members: service auth (platform secret + x-svc-user). */
function projectMemberRoutes(app: FastifyInstance, deps: AppDeps): void {
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
      return { status: 200, body: { members: await listProjectMembers(deps, auth.orgId, params.id) } };
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
    async handler({ auth, params, body, run, deps }) {
      const r = await setProjectMember(deps, run, auth.orgId, params.id, body.user_id, body.role);
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
      const r = await setProjectMember(deps, run, auth.orgId, params.id, params.user_id, body.role, true);
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
    async handler({ auth, params, run, deps }) {
      await removeProjectMember(deps, run, auth.orgId, params.id, params.user_id);
      return { status: 204 };
    },
  });
}
