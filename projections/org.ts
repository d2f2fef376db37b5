import { parseEvent } from '../events/index.ts';
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
  },
  eventTypes: new Set(['org.created', 'project.created', 'project.updated', 'project.default_changed', 'project.deleted']),

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
    }
  },
};

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
  const { rows } = await db.query<ProjectRow>(`SELECT ${PROJECT_COLUMNS} FROM projects WHERE org_id = $1 AND deleted_at IS NULL ORDER BY created_at, id`, [orgId]);
  return rows;
}
