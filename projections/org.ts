import { parseEvent } from '../events/index.ts';
import { arrayLiteral } from '../src/postgres/array-literal.ts';
import type { Queryable } from '../src/postgres/db.ts';
import type { Projection, TableNames } from '../src/projector/projection.ts';

// Read model of organizations and their projects. Rows carry the log position
// of the last event applied to them; an older event never overwrites a newer row.

export const orgProjection: Projection = {
  name: 'org',
  version: 1,
  tables: {
    orgs: (t) => `CREATE TABLE ${t} (
      org_id text PRIMARY KEY,
      name text NOT NULL,
      created_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    )`,
    projects: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY,
      org_id text NOT NULL,
      name text NOT NULL,
      slug text NOT NULL,
      environment text NOT NULL,
      is_default boolean NOT NULL,
      settings jsonb NOT NULL,
      created_at timestamptz NOT NULL,
      deleted_at timestamptz,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (org_id, created_at)`,
    users: (t) => `CREATE TABLE ${t} (
      user_id text PRIMARY KEY,
      org_id text NOT NULL,
      email text NOT NULL,
      display_name text,
      role text NOT NULL,
      added_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (org_id)`,
    project_members: (t) => `CREATE TABLE ${t} (
      project_id text NOT NULL,
      user_id text NOT NULL,
      org_id text NOT NULL,
      role text NOT NULL,
      added_at timestamptz NOT NULL,
      removed boolean NOT NULL DEFAULT false,
      position text COLLATE "C" NOT NULL,
      PRIMARY KEY (project_id, user_id)
    )`,
    api_keys: (t) => `CREATE TABLE ${t} (
      key_id text PRIMARY KEY,
      org_id text NOT NULL,
      project_id text,
      name text NOT NULL,
      environment text NOT NULL,
      scopes jsonb NOT NULL,
      key_hash text NOT NULL UNIQUE,
      key_prefix text NOT NULL,
      created_at timestamptz NOT NULL,
      revoked_at timestamptz,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (org_id, created_at)`,
  },
  eventTypes: new Set([
    'org.created',
    'project.created',
    'project.updated',
    'project.default_changed',
    'project.deleted',
    'user.added',
    'user.role_changed',
    'user.removed',
    'project_member.set',
    'project_member.removed',
    'api_key.created',
    'api_key.revoked',
  ]),

  async apply(tx, event, t) {
    const e = parseEvent(event.type, event.data);
    const org = event.metadata.org_id;
    const pos = event.position;
    switch (e.type) {
      case 'org.created':
        await tx.query(`INSERT INTO ${t.orgs} (org_id, name, created_at, position) VALUES ($1, $2, $3, $4) ON CONFLICT (org_id) DO NOTHING`, [
          e.data.org_id,
          e.data.name,
          e.data.created_at,
          pos,
        ]);
        return;
      case 'project.created':
        await tx.query(
          `INSERT INTO ${t.projects} (id, org_id, name, slug, environment, is_default, settings, created_at, position)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO NOTHING`,
          [e.data.project_id, org, e.data.name, e.data.slug, e.data.environment, e.data.is_default, JSON.stringify(e.data.settings), e.data.created_at, pos],
        );
        return;
      case 'project.updated':
        await tx.query(
          `UPDATE ${t.projects} SET name = coalesce($2, name), slug = coalesce($3, slug), position = $4 WHERE id = $1 AND position < $4`,
          [e.data.project_id, e.data.name ?? null, e.data.slug ?? null, pos],
        );
        return;
      case 'project.default_changed':
        await tx.query(`UPDATE ${t.projects} SET is_default = (id = $2), position = $3 WHERE org_id = $1 AND position < $3`, [org, e.data.project_id, pos]);
        return;
      case 'project.deleted':
        await tx.query(`UPDATE ${t.projects} SET deleted_at = $2, position = $3 WHERE id = $1 AND position < $3`, [e.data.project_id, event.metadata.occurred_at ?? event.recordedAt, pos]);
        return;
      case 'user.added':
        await tx.query(
          `INSERT INTO ${t.users} (user_id, org_id, email, display_name, role, added_at, position) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (user_id) DO NOTHING`,
          [e.data.user_id, org, e.data.email, e.data.display_name, e.data.role, e.data.added_at, pos],
        );
        return;
      case 'user.role_changed':
        await tx.query(`UPDATE ${t.users} SET role = $2, position = $3 WHERE user_id = $1 AND position < $3`, [e.data.user_id, e.data.role, pos]);
        return;
      case 'user.removed':
        await tx.query(`DELETE FROM ${t.users} WHERE user_id = $1`, [e.data.user_id]);
        return;
      case 'project_member.set':
        await tx.query(
          `INSERT INTO ${t.project_members} (project_id, user_id, org_id, role, added_at, removed, position) VALUES ($1, $2, $3, $4, $5, false, $6)
           ON CONFLICT (project_id, user_id) DO UPDATE SET role = EXCLUDED.role, removed = false,
             added_at = CASE WHEN ${t.project_members}.removed THEN EXCLUDED.added_at ELSE ${t.project_members}.added_at END, position = EXCLUDED.position
           WHERE ${t.project_members}.position < EXCLUDED.position`,
          [e.data.project_id, e.data.user_id, org, e.data.role, event.metadata.occurred_at ?? event.recordedAt, pos],
        );
        return;
      case 'project_member.removed':
        await tx.query(`UPDATE ${t.project_members} SET removed = true, position = $3 WHERE project_id = $1 AND user_id = $2 AND position < $3`, [e.data.project_id, e.data.user_id, pos]);
        return;
      case 'api_key.created':
        await tx.query(
          `INSERT INTO ${t.api_keys} (key_id, org_id, project_id, name, environment, scopes, key_hash, key_prefix, created_at, position)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (key_id) DO NOTHING`,
          [e.data.key_id, org, e.data.project_id, e.data.name, e.data.environment, JSON.stringify(e.data.scopes), e.data.key_hash, e.data.key_prefix, e.data.created_at, pos],
        );
        return;
      case 'api_key.revoked':
        await tx.query(`UPDATE ${t.api_keys} SET revoked_at = $2, position = $3 WHERE key_id = $1 AND position < $3`, [e.data.key_id, event.metadata.occurred_at ?? event.recordedAt, pos]);
        return;
    }
  },
};

const PROJECT_EVENTS = new Set(['org.created', 'project.created', 'project.updated', 'project.default_changed', 'project.deleted']);

/** The project row's columns, in the order of the statements' parameters. */
const PROJECT_COLUMNS_IN = ['id', 'org_id', 'name', 'slug', 'environment', 'is_default', 'settings', 'created_at', 'deleted_at', 'position'] as const;

type ProjectRecord = {
  id: string;
  org_id: string;
  name: string;
  slug: string;
  environment: string;
  is_default: boolean;
  settings: string;
  created_at: string;
  deleted_at: string | null;
  position: string;
};

/**
 * The set-based form: load the rows a batch touches, fold the batch over them in
 * memory with exactly the rules of `apply` (same position guards), and write
 * the touched rows back in one upsert. Statements issued together, whatever the
 * batch's size.
 * Fresh (a rebuild's bulk phase): a row the batch creates does not exist yet,
 * so it is not looked for, and goes in by a plain INSERT, without the upsert's
 * conflict check; a row an earlier batch wrote is not read either: its events
 * go as `apply` writes them (guarded statements, in order). Every statement is
 * then issued before any answer (`pipelined`), so a rebuild can send the
 * batch's COMMIT, and the next batch, right behind them.
 */
orgProjection.applyBatch = async (tx, events, t, opts = {}) => {
  const ids = new Set<string>();
  const orgsAll = new Set<string>();
  // What the batch reads first (fresh: nothing, above).
  for (const ev of opts.fresh ? [] : events) {
    const id = (ev.data as { project_id?: string }).project_id;
    // A creation of an id that exists changes nothing (as in `apply`): load it to know.
    if (ev.type === 'project.updated' || ev.type === 'project.deleted' || ev.type === 'project.created') ids.add(id!);
    if (ev.type === 'project.default_changed') orgsAll.add(ev.metadata.org_id);
  }
  const rows = new Map<string, ProjectRecord>();
  const cols = `id, org_id, name, slug, environment, is_default, settings::text AS settings, created_at::text AS created_at, deleted_at::text AS deleted_at, position`;
  // Two indexed lookups rather than one OR, which a fresh table's planner may turn into a scan.
  if (ids.size > 0) {
    const { rows: found } = await tx.query<ProjectRecord>(`SELECT ${cols} FROM ${t.projects} WHERE id = ANY($1)`, [[...ids]]);
    for (const r of found) rows.set(r.id, r);
  }
  if (orgsAll.size > 0) {
    const { rows: found } = await tx.query<ProjectRecord>(`SELECT ${cols} FROM ${t.projects} WHERE org_id = ANY($1)`, [[...orgsAll]]);
    for (const r of found) rows.set(r.id, r);
  }
  const loaded = new Set(rows.keys());
  const touched = new Set<string>();
  const newOrgs: { org_id: string; name: string; created_at: string; position: string }[] = [];
  // The writes are issued together and answered together.
  const writes: Promise<unknown>[] = [];
  for (const ev of events) {
    if (!PROJECT_EVENTS.has(ev.type)) {
      // Other tables do not depend on the project rows: apply in order, one by one.
      if (opts.fresh) writes.push(orgProjection.apply(tx, ev, t));
      else await orgProjection.apply(tx, ev, t);
      continue;
    }
    // Fresh: a row an earlier batch wrote (not in memory) is changed as `apply` changes it, by a guarded statement.
    const id = (ev.data as { project_id?: string }).project_id!;
    const earlier = ev.type === 'project.default_changed' || ((ev.type === 'project.updated' || ev.type === 'project.deleted') && !rows.has(id));
    if (opts.fresh && earlier) writes.push(orgProjection.apply(tx, ev, t));
    const e = parseEvent(ev.type, ev.data);
    const pos = ev.position;
    switch (e.type) {
      case 'org.created':
        newOrgs.push({ org_id: e.data.org_id, name: e.data.name, created_at: e.data.created_at, position: pos });
        break;
      case 'project.created':
        if (!rows.has(e.data.project_id)) {
          rows.set(e.data.project_id, {
            id: e.data.project_id,
            org_id: ev.metadata.org_id,
            name: e.data.name,
            slug: e.data.slug,
            environment: e.data.environment,
            is_default: e.data.is_default,
            settings: JSON.stringify(e.data.settings),
            created_at: e.data.created_at,
            deleted_at: null,
            position: pos,
          });
          touched.add(e.data.project_id);
        }
        break;
      case 'project.updated': {
        const r = rows.get(e.data.project_id);
        if (r && r.position < pos) {
          if (e.data.name !== undefined) r.name = e.data.name;
          if (e.data.slug !== undefined) r.slug = e.data.slug;
          r.position = pos;
          touched.add(r.id);
        }
        break;
      }
      case 'project.default_changed':
        for (const r of rows.values()) {
          if (r.org_id === ev.metadata.org_id && r.position < pos) {
            r.is_default = r.id === e.data.project_id;
            r.position = pos;
            touched.add(r.id);
          }
        }
        break;
      case 'project.deleted': {
        const r = rows.get(e.data.project_id);
        if (r && r.position < pos) {
          r.deleted_at = (ev.metadata.occurred_at as string | undefined) ?? ev.recordedAt;
          r.position = pos;
          touched.add(r.id);
        }
        break;
      }
    }
  }
  if (newOrgs.length > 0) {
    writes.push(
      tx.query(
        `INSERT INTO ${t.orgs} (org_id, name, created_at, position)
         SELECT org_id, name, created_at, position FROM json_to_recordset($1::json) AS x(org_id text, name text, created_at timestamptz, position text)
         ON CONFLICT (org_id) DO NOTHING`,
        [JSON.stringify(newOrgs)],
      ),
    );
  }
  // Project rows travel as one array per column (arrayLiteral): PostgreSQL
  // reads them a fifth faster than the same rows as a JSON document.
  const insert = `INSERT INTO ${t.projects} (id, org_id, name, slug, environment, is_default, settings, created_at, deleted_at, position)
       SELECT id, org_id, name, slug, environment, is_default, settings::jsonb, created_at, deleted_at, position
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::boolean[], $7::text[], $8::timestamptz[], $9::timestamptz[], $10::text[])
         AS x(id, org_id, name, slug, environment, is_default, settings, created_at, deleted_at, position)`;
  const columns = (rs: ProjectRecord[]) => PROJECT_COLUMNS_IN.map((c) => arrayLiteral(rs.map((r) => r[c])));
  const upserts: ProjectRecord[] = [];
  const inserts: ProjectRecord[] = [];
  for (const id of touched) (opts.fresh && !loaded.has(id) ? inserts : upserts).push(rows.get(id)!);
  if (inserts.length > 0) writes.push(tx.query(insert, columns(inserts)));
  if (upserts.length > 0) {
    writes.push(
      tx.query(
        `${insert}
         ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, slug = EXCLUDED.slug, is_default = EXCLUDED.is_default,
           deleted_at = EXCLUDED.deleted_at, position = EXCLUDED.position
         WHERE ${t.projects}.position < EXCLUDED.position`,
        columns(upserts),
      ),
    );
  }
  await Promise.all(writes);
};

/** Fresh, every statement of a batch goes out before any answer (see applyBatch). */
orgProjection.pipelined = (_events, opts) => opts?.fresh === true;

export type ProjectRow = {
  id: string;
  org_id: string;
  name: string;
  slug: string;
  environment: 'live' | 'test';
  is_default: boolean;
  created_at: string;
};

const PROJECT_COLUMNS = `id, org_id, name, slug, environment, is_default, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created_at`;

export async function getProject(db: Queryable, orgId: string, id: string, t: TableNames = { projects: 'projects' }): Promise<ProjectRow | undefined> {
  const { rows } = await db.query<ProjectRow>(`SELECT ${PROJECT_COLUMNS} FROM ${t.projects} WHERE org_id = $1 AND id = $2 AND deleted_at IS NULL`, [orgId, id]);
  return rows[0];
}

export async function listProjects(db: Queryable, orgId: string): Promise<ProjectRow[]> {
  const { rows } = await db.query<ProjectRow>(`SELECT ${PROJECT_COLUMNS} FROM projects WHERE org_id = $1 AND deleted_at IS NULL ORDER BY projects.created_at, id`, [orgId]);
  return rows;
}
