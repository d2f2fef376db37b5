import { hash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest, preHandlerHookHandler } from 'fastify';
import { z } from 'zod';
import { Rejection } from '../eventstore/handler.ts';
import { keysLastUsed } from '../usecases/key-usage.ts';
import { type ApiKeyRow as KeyRow, type CreatedApiKey, createApiKey, listApiKeys, revokeApiKey } from '../usecases/orgs.ts';
import { Badge, Button, type Column, Copyable, EmptyState, ErrorSummary, Field, type FieldError, PostForm, Select, Table, Time } from './components.tsx';
import { atLeast, csrfOk, type DashboardDeps, flash, formField, personRun, rejectionText, takeFlash } from './context.ts';
import { Shell, sendPage } from './layout.tsx';
import { refusedPage, roleRefusedPage } from './refused.tsx';
import type { Person } from './session.ts';

// API keys: the organization's keys of the environment the switch shows
// (prefix, scopes, project, last used), create (the secret shown exactly once,
// with a copy button, on the answer to the POST itself: it is never stored,
// so a reload cannot show it again) and revoke. The use cases of /v1/api-keys;
// like them, an admin or owner of the organization only.

/** The hash the authenticator looks keys up by (SHA-256, hex): the key recorded is the key it accepts. */
const keyHash = (key: string) => hash('sha256', key, 'hex');
const Name = z.string().trim().min(1).max(200);
const Scope = /^(\*|[a-z_]+:(read|write|\*))$/;

type ApiKeyRow = KeyRow & { last_used_at: string | null };
type Form = { name?: string; scopes?: string; project?: string };

function KeysPage({ person, keys, now, errors, form, created, notice }: { person: Person; keys: ApiKeyRow[]; now: Date; errors: FieldError[]; form: Form; created?: CreatedApiKey; notice?: { text: string; tone: 'ok' | 'error' } | null }) {
  const projectName = (id: string | null) => (id === null ? 'All projects' : (person.projects.find((p) => p.id === id)?.name ?? id));
  const columns: Column<ApiKeyRow>[] = [
    { label: 'Name', cell: (k) => k.name },
    { label: 'Key', cell: (k) => <Copyable value={`${k.prefix}…`} label={`the prefix of ${k.name}`} /> },
    { label: 'Project', cell: (k) => projectName(k.project_id) },
    { label: 'Scopes', cell: (k) => <code>{k.scopes.join(' ')}</code> },
    { label: 'Created', cell: (k) => <Time iso={k.created_at} now={now} /> },
    { label: 'Last used', cell: (k) => <Time iso={k.last_used_at} now={now} /> },
    {
      label: 'Status',
      cell: (k) =>
        k.revoked_at ? (
          <Badge tone="danger">Revoked</Badge>
        ) : (
          <PostForm action={`/dashboard/keys/${k.id}/revoke`} csrf={person.csrfToken} inline>
            <Badge tone="ok">Active</Badge>{' '}
            <Button kind="danger" small id={`revoke-${k.id}`}>
              Revoke<span class="visually-hidden"> {k.name}</span>
            </Button>
          </PostForm>
        ),
    },
  ];
  const env = person.environment;
  return (
    <Shell person={person} title="API keys" active="keys" path="/dashboard/keys" notice={notice}>
      {created ? (
        <div class="panel" id="created-key">
          <h2>Copy your new key now</h2>
          <p>
            This is the only time the key <strong>{created.name}</strong> is shown. We keep only its hash: if you lose it, revoke it and create another.
          </p>
          <Copyable value={created.key} id="new-key-secret" label="the new API key" secret />
        </div>
      ) : null}
      <ErrorSummary errors={errors} />
      <p>
        Programs and agents call the API with these keys. Showing <strong>{env}</strong> keys: {env === 'live' ? 'they settle real money.' : 'they settle on test networks.'}
      </p>
      {keys.length === 0 ? (
        <EmptyState title={`No ${env} keys yet.`}>
          <p>Create one below.</p>
        </EmptyState>
      ) : (
        <Table caption={`${keys.length} ${env} ${keys.length === 1 ? 'key' : 'keys'}`} columns={columns} rows={keys} id="keys" />
      )}
      <div class="panel">
        <h2>Create a {env} key</h2>
        <PostForm action="/dashboard/keys" csrf={person.csrfToken} id="create-key">
          <Field id="key-name" name="name" label="Name" hint="What uses it, e.g. “checkout agent”." value={form.name} error={errors.find((e) => e.field === 'key-name')?.message} maxLength={200} />
          <Select id="key-project" name="project" label="Project" options={[{ value: '', label: 'All projects' }, ...person.projects.map((p) => ({ value: p.id, label: p.name }))]} value={form.project ?? ''} />
          <Field id="key-scopes" name="scopes" label="Scopes" hint="Separated by spaces: * for everything, or e.g. mandates:read agents:write." value={form.scopes ?? '*'} error={errors.find((e) => e.field === 'key-scopes')?.message} />
          <Button id="create-key-submit">Create key</Button>
        </PostForm>
      </div>
    </Shell>
  );
}

export async function keyRoutes(app: FastifyInstance, deps: DashboardDeps, signedIn: preHandlerHookHandler): Promise<void> {
  const keysOf = async (person: Person): Promise<ApiKeyRow[]> => {
    const used = await keysLastUsed(deps.db, person.orgId);
    return (await listApiKeys(deps, person.orgId)).filter((k) => k.environment === person.environment).map((k) => ({ ...k, last_used_at: used.get(k.id) ?? null }));
  };
  const render = async (req: FastifyRequest, reply: FastifyReply, opts: { status?: number; errors?: FieldError[]; form?: Form; created?: CreatedApiKey } = {}) => {
    const person = req.person!;
    return sendPage(
      reply,
      <KeysPage person={person} keys={await keysOf(person)} now={deps.now()} errors={opts.errors ?? []} form={opts.form ?? {}} {...(opts.created ? { created: opts.created } : {})} notice={opts.created ? { text: 'The key is created.', tone: 'ok' } : takeFlash(req, reply)} />,
      opts.status ?? 200,
    );
  };
  /** An admin or owner of the organization, as /v1/api-keys asks; else the refusal page. */
  const admin = (req: FastifyRequest, reply: FastifyReply) => (atLeast(req.person!.role, 'admin') ? null : roleRefusedPage(reply, req.person!, 'admin', 'keys'));

  app.get('/dashboard/keys', { preHandler: signedIn }, async (req, reply) => admin(req, reply) ?? render(req, reply));

  app.post('/dashboard/keys', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    if (!csrfOk(req, deps.baseUrl, person)) return refusedPage(reply);
    const refused = admin(req, reply);
    if (refused) return refused;
    const form: Form = { name: formField(req.body, 'name'), scopes: formField(req.body, 'scopes'), project: formField(req.body, 'project') };
    const errors: FieldError[] = [];
    const name = Name.safeParse(form.name);
    if (!name.success) errors.push({ field: 'key-name', message: 'Enter a name of 1 to 200 characters' });
    const scopes = (form.scopes ?? '').split(/[\s,]+/).filter(Boolean);
    if (scopes.length === 0 || scopes.length > 50 || !scopes.every((s) => Scope.test(s))) errors.push({ field: 'key-scopes', message: 'Enter scopes like * or mandates:read, separated by spaces' });
    const projectId = form.project ? (person.projects.find((p) => p.id === form.project)?.id ?? null) : null;
    if (form.project && !projectId) errors.push({ field: 'key-project', message: 'Choose a project of this organization' });
    if (errors.length > 0 || !name.success) return render(req, reply, { status: 400, errors, form });
    try {
      const created = await createApiKey(personRun(deps, req, person), person.orgId, { name: name.data, environment: person.environment, project_id: projectId, scopes }, keyHash);
      return render(req, reply, { created });
    } catch (err) {
      if (!(err instanceof Rejection)) throw err;
      return render(req, reply, { status: 409, errors: [{ field: 'key-name', message: rejectionText(err) }], form });
    }
  });

  app.post('/dashboard/keys/:id/revoke', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    if (!csrfOk(req, deps.baseUrl, person)) return refusedPage(reply);
    const refused = admin(req, reply);
    if (refused) return refused;
    const id = (req.params as { id: string }).id;
    try {
      await revokeApiKey(personRun(deps, req, person), person.orgId, /^key_[A-Za-z0-9]{16}$/.test(id) ? id : 'key_unknown');
      flash(reply, 'The key is revoked: it is refused from now on.');
    } catch (err) {
      if (!(err instanceof Rejection)) throw err;
      flash(reply, rejectionText(err), 'error');
    }
    return reply.redirect('/dashboard/keys', 303);
  });
}
