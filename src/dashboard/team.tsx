import type { FastifyInstance, FastifyReply, FastifyRequest, preHandlerHookHandler } from 'fastify';
import { z } from 'zod';
import type { Role } from '../../commands/org.ts';
import { Rejection } from '../eventstore/handler.ts';
import { addTeamMember } from '../usecases/orgs.ts';
import { removeProjectMember, setProjectMember } from '../usecases/projects.ts';
import { changeMemberRole, listTeam, removeMember, roleInProject, type TeamRow } from '../usecases/team.ts';
import { Badge, Button, type Column, ErrorSummary, Field, type FieldError, PostForm, Select, Table, Time } from './components.tsx';
import { atLeast, csrfOk, type DashboardDeps, flash, formField, personRun, rejectionText, takeFlash } from './context.ts';
import { Shell, sendPage } from './layout.tsx';
import { refusedPage, roleRefusedPage } from './refused.tsx';
import type { Person } from './session.ts';

// Team: the organization's members and roles, invite by e-mail (the invitee
// signs in with a code), change a role, remove, and project overrides. The
// same use cases and refusals as the HTTP API (POST /v1/team/members needs an
// admin; project members need an admin in the project; only an owner makes
// an owner), said in words.

const Email = z.string().trim().toLowerCase().pipe(z.email()).pipe(z.string().max(254));
const ROLE_LABEL: Record<Role, string> = { owner: 'Owner', admin: 'Admin', member: 'Member' };
const USER_ID = /^usr_[A-Za-z0-9]{16}$/;

function MemberActions({ person, row }: { person: Person; row: TeamRow }) {
  const csrf = person.csrfToken;
  const roles: Role[] = person.role === 'owner' ? ['owner', 'admin', 'member'] : ['admin', 'member'];
  const id = row.user_id;
  return (
    <div class="actions">
      {row.org_role === 'owner' && person.role !== 'owner' ? null : (
        <PostForm action={`/dashboard/team/${id}/role`} csrf={csrf} inline>
          <label class="visually-hidden" for={`role-${id}`}>
            Organization role of {row.email}
          </label>
          <select id={`role-${id}`} name="role">
            {roles.map((r) => (
              <option value={r} selected={r === row.org_role}>
                {ROLE_LABEL[r]}
              </option>
            ))}
          </select>{' '}
          <Button kind="secondary" small id={`change-role-${id}`}>
            Change role
          </Button>
        </PostForm>
      )}
      {row.org_role === 'owner' ? null : (
        <PostForm action={`/dashboard/team/${id}/project-role`} csrf={csrf} inline>
          <label class="visually-hidden" for={`project-role-${id}`}>
            Role of {row.email} in this project
          </label>
          <select id={`project-role-${id}`} name="role">
            <option value="" selected={!row.override}>
              As in the organization
            </option>
            <option value="admin" selected={row.override && row.project_role === 'admin'}>
              Admin here
            </option>
            <option value="member" selected={row.override && row.project_role === 'member'}>
              Member here
            </option>
          </select>{' '}
          <Button kind="secondary" small id={`set-project-role-${id}`}>
            Set project role
          </Button>
        </PostForm>
      )}
      {row.user_id === person.userId || (row.org_role === 'owner' && person.role !== 'owner') ? null : (
        <PostForm action={`/dashboard/team/${id}/remove`} csrf={csrf} inline>
          <Button kind="danger" small id={`remove-${id}`}>
            Remove<span class="visually-hidden"> {row.email}</span>
          </Button>
        </PostForm>
      )}
    </div>
  );
}

function TeamPage({ person, rows, now, errors, email, canManage, notice }: { person: Person; rows: TeamRow[]; now: Date; errors: FieldError[]; email?: string; canManage: boolean; notice?: { text: string; tone: 'ok' | 'error' } | null }) {
  const project = person.projects.find((p) => p.id === person.projectId);
  const columns: Column<TeamRow>[] = [
    { label: 'Member', cell: (r) => (<span>{r.email}{r.user_id === person.userId ? ' (you)' : ''}</span>) },
    { label: 'Organization role', cell: (r) => <Badge tone={r.org_role === 'owner' ? 'ok' : 'neutral'}>{ROLE_LABEL[r.org_role]}</Badge> },
    { label: `Role in ${project?.name ?? 'this project'}`, cell: (r) => (<span>{ROLE_LABEL[r.project_role]}{r.override ? <> <Badge tone="warn">override</Badge></> : null}</span>) },
    { label: 'Added', cell: (r) => <Time iso={r.added_at} now={now} /> },
    ...(canManage ? [{ label: 'Actions', cell: (r: TeamRow) => <MemberActions person={person} row={r} /> }] : []),
  ];
  return (
    <Shell person={person} title="Team" active="team" path="/dashboard/team" notice={notice}>
      <ErrorSummary errors={errors} />
      <p>People who sign in to this organization. Owners can do everything; admins manage members, keys and projects; members read and decide approvals.</p>
      <Table caption={`${rows.length} ${rows.length === 1 ? 'member' : 'members'}`} columns={columns} rows={rows} id="members" />
      {canManage ? (
        <div class="panel">
          <h2 id="invite-title">Invite a member</h2>
          <p>They sign in with this address: we send them a note, and a code each time they sign in.</p>
          <PostForm action="/dashboard/team/invite" csrf={person.csrfToken} id="invite">
            <Field id="invite-email" name="email" label="E-mail address" type="email" autocomplete="off" value={email} error={errors.find((e) => e.field === 'invite-email')?.message} />
            <Select id="invite-role" name="role" label="Role" options={[{ value: 'member', label: 'Member' }, { value: 'admin', label: 'Admin' }]} value="member" />
            <Button id="invite-submit">Invite</Button>
          </PostForm>
        </div>
      ) : (
        <p id="team-read-only">You are a member here: an admin or owner invites people and changes roles.</p>
      )}
    </Shell>
  );
}

export async function teamRoutes(app: FastifyInstance, deps: DashboardDeps, signedIn: preHandlerHookHandler): Promise<void> {
  const render = async (req: FastifyRequest, reply: FastifyReply, status = 200, errors: FieldError[] = [], email?: string) => {
    const person = req.person!;
    const rows = await listTeam(deps.db, person.orgId, person.projectId);
    return sendPage(reply, <TeamPage person={person} rows={rows} now={deps.now()} errors={errors} {...(email !== undefined ? { email } : {})} canManage={atLeast(person.role, 'admin')} notice={takeFlash(req, reply)} />, status);
  };

  app.get('/dashboard/team', { preHandler: signedIn }, async (req, reply) => render(req, reply));

  /** The common gate of every Team action: the CSRF check, then the role (the organization's, or the project's for overrides). */
  const gate = async (req: FastifyRequest, reply: FastifyReply, scope: 'org' | 'project'): Promise<Person | null> => {
    const person = req.person!;
    if (!csrfOk(req, deps.baseUrl, person)) return (await refusedPage(reply), null);
    const role = scope === 'org' ? person.role : await roleInProject(deps.db, person.userId, person.role, person.projectId);
    if (!atLeast(role, 'admin')) return (await roleRefusedPage(reply, person, 'admin'), null);
    return person;
  };
  /** Runs an action; a refusal comes back as the notice, in words. */
  const act = async (reply: FastifyReply, done: string, f: () => Promise<unknown>) => {
    try {
      await f();
      flash(reply, done);
    } catch (err) {
      if (!(err instanceof Rejection)) throw err;
      flash(reply, rejectionText(err), 'error');
    }
    return reply.redirect('/dashboard/team', 303);
  };
  const target = (req: FastifyRequest) => {
    const id = (req.params as { user_id: string }).user_id;
    return USER_ID.test(id) ? id : 'usr_unknown';
  };

  app.post('/dashboard/team/invite', { preHandler: signedIn }, async (req, reply) => {
    const person = await gate(req, reply, 'org');
    if (!person) return reply;
    const raw = formField(req.body, 'email');
    const email = Email.safeParse(raw);
    const role = formField(req.body, 'role');
    if (!email.success) return render(req, reply, 400, [{ field: 'invite-email', message: 'Enter an e-mail address, like name@example.com' }], raw);
    if (role !== 'admin' && role !== 'member') return render(req, reply, 400, [{ field: 'invite-role', message: 'Choose Member or Admin' }], raw);
    return act(reply, `${email.data} is invited as ${role}. They sign in at ${deps.baseUrl}/dashboard with this address.`, async () => {
      await addTeamMember(personRun(deps, req, person), person.orgId, { email: email.data, role });
      const org = person.orgs.find((o) => o.orgId === person.orgId)?.name ?? 'an organization';
      void deps.mailer
        .send({ to: email.data, subject: `You were invited to ${org}`, text: `${person.email} invited you to ${org} as ${role}.\n\nSign in with this address at ${deps.baseUrl}/dashboard: we send you a code.` })
        .catch((err: unknown) => req.log.warn({ err: { message: (err as Error).message } }, 'an invitation could not be mailed'));
    });
  });

  app.post('/dashboard/team/:user_id/role', { preHandler: signedIn }, async (req, reply) => {
    const person = await gate(req, reply, 'org');
    if (!person) return reply;
    const role = formField(req.body, 'role');
    if (role !== 'owner' && role !== 'admin' && role !== 'member') return (flash(reply, 'Choose Owner, Admin or Member.', 'error'), reply.redirect('/dashboard/team', 303));
    return act(reply, `The role is now ${ROLE_LABEL[role]}.`, () => changeMemberRole(personRun(deps, req, person), person.orgId, target(req), role, person.role));
  });

  app.post('/dashboard/team/:user_id/remove', { preHandler: signedIn }, async (req, reply) => {
    const person = await gate(req, reply, 'org');
    if (!person) return reply;
    if (target(req) === person.userId) return (flash(reply, 'You cannot remove yourself: ask another admin or owner.', 'error'), reply.redirect('/dashboard/team', 303));
    return act(reply, 'The member was removed; their sessions no longer open.', () => removeMember(personRun(deps, req, person), person.orgId, target(req), person.role));
  });

  app.post('/dashboard/team/:user_id/project-role', { preHandler: signedIn }, async (req, reply) => {
    const person = await gate(req, reply, 'project');
    if (!person) return reply;
    const role = formField(req.body, 'role');
    const run = personRun(deps, req, person);
    if (role === '') return act(reply, 'The project override is removed: the organization role applies.', () => removeProjectMember(deps, run, person.orgId, person.projectId, target(req)));
    if (role !== 'admin' && role !== 'member') return (flash(reply, 'Choose a project role.', 'error'), reply.redirect('/dashboard/team', 303));
    return act(reply, `The role in this project is now ${ROLE_LABEL[role]}.`, () => setProjectMember(deps, run, person.orgId, person.projectId, target(req), role));
  });
}
