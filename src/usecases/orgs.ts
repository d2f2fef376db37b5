import { type ActiveOrg, orgDecider, orgStream } from '../../commands/org.ts';
import { newId, randomString } from '../ids.ts';
import { isoText as TS } from '../postgres/iso-text.ts';
import type { Ports, RunCommand } from './context.ts';
import { type ProjectRow, projectView } from './projects.ts';

// Bootstrap and credentials: organizations, team members, API keys.
// Organizations, users and keys are events in the organization's stream (the
// key's hash, never the key); the keys are listed from the read model.

export type CreatedOrg = {
  org: { id: string; name: string; created_at: string };
  owner: { user_id: string; email: string; role: 'owner' };
  default_project: ProjectRow;
};

/** A new organization with its owner and its default project, in one append to a stream that must not exist yet. */
export async function createOrganization(run: RunCommand, body: { name: string; owner_email: string; owner_display_name?: string | undefined }): Promise<CreatedOrg> {
  const orgId = newId('org');
  const userId = newId('usr');
  const projectId = newId('prj');
  const r = await run(
    orgDecider,
    orgStream(orgId),
    { type: 'create_org', orgId, name: body.name, defaultProjectId: projectId, owner: { userId, email: body.owner_email, displayName: body.owner_display_name ?? null } },
    { orgId, projectId: null, expectedRevision: 'no_stream' },
  );
  const s = r.state as ActiveOrg;
  const created = r.events[0]!.type === 'org.created' ? r.events[0]!.data.created_at : '';
  return { org: { id: orgId, name: body.name, created_at: created }, owner: { user_id: userId, email: body.owner_email, role: 'owner' }, default_project: projectView(orgId, projectId, s) };
}

/** A user added to the organization with a role (user_exists when the email is taken). */
export async function addTeamMember(run: RunCommand, orgId: string, body: { email: string; role: 'admin' | 'member'; display_name?: string | undefined }): Promise<{ user_id: string; email: string; role: 'admin' | 'member' }> {
  const userId = newId('usr');
  await run(orgDecider, orgStream(orgId), { type: 'add_user', userId, email: body.email, displayName: body.display_name ?? null, role: body.role });
  return { user_id: userId, email: body.email, role: body.role };
}

export function newApiKey(environment: 'live' | 'test'): string {
  return `sk_${environment}_${randomString(32)}`;
}

export type CreatedApiKey = { id: string; key: string; name: string; environment: 'live' | 'test'; project_id: string | null; scopes: string[]; created_at: string };

/**
 * A new API key, answered once with the key itself; the stream records its
 * hash by `hashKey`, the authenticator's own, so the key recorded is the key
 * it accepts.
 */
export async function createApiKey(
  run: RunCommand,
  orgId: string,
  body: { name: string; environment: 'live' | 'test'; project_id?: string | null | undefined; scopes?: string[] | undefined },
  hashKey: (key: string) => string,
): Promise<CreatedApiKey> {
  const keyId = newId('key');
  const key = newApiKey(body.environment);
  const scopes = body.scopes ?? ['*'];
  const projectId = body.project_id ?? null;
  const r = await run(orgDecider, orgStream(orgId), {
    type: 'create_api_key',
    keyId,
    name: body.name,
    environment: body.environment,
    projectId,
    scopes,
    keyHash: hashKey(key),
    keyPrefix: key.slice(0, 12),
    worldProjectId: newId('prj'),
  });
  const e = r.events.find((x) => x.type === 'api_key.created')!;
  const createdAt = e.type === 'api_key.created' ? e.data.created_at : '';
  return { id: keyId, key, name: body.name, environment: body.environment, project_id: projectId, scopes, created_at: createdAt };
}

export type ApiKeyRow = { id: string; name: string; environment: 'live' | 'test'; project_id: string | null; scopes: string[]; prefix: string; created_at: string; revoked_at: string | null };

/** The organization's API keys (never the keys themselves), newest first. */
export async function listApiKeys(ports: Pick<Ports, 'db'>, orgId: string): Promise<ApiKeyRow[]> {
  const { rows } = await ports.db.query<ApiKeyRow>(
    `SELECT key_id AS id, name, environment, project_id, scopes, key_prefix AS prefix,
       ${TS('created_at')} AS created_at,
       ${TS('revoked_at')} AS revoked_at
     FROM api_keys WHERE org_id = $1 ORDER BY api_keys.created_at DESC, key_id`,
    [orgId],
  );
  return rows;
}

export async function revokeApiKey(run: RunCommand, orgId: string, keyId: string): Promise<void> {
  await run(orgDecider, orgStream(orgId), { type: 'revoke_api_key', keyId });
}
