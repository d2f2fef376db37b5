import type { Ports } from './context.ts';

// What an API key resolves to (GET /v1/whoami), in two forms: our flat ids,
// and the objects the product's command-line client reads (issue 58):
// `user {id, email}`, `organization {id, name}`, `project {id, name}`,
// `key {id, environment, scopes}`. A key acts for its organization, not for a
// person; the `user` shown is the organization's owner, the person accountable
// for its keys (null when the organization has none on record).

export type WhoamiKey = { orgId: string; projectId: string; keyId: string; environment: 'live' | 'test'; scopes: string[] };

export type Whoami = {
  org_id: string;
  project_id: string;
  api_key_id: string;
  environment: 'live' | 'test';
  scopes: string[];
  user: { id: string; email: string; name: string | null; role: 'owner' } | null;
  organization: { id: string; name: string };
  project: { id: string; name: string; slug: string | null };
  key: { id: string; name: string | null; environment: 'live' | 'test'; scopes: string[] };
};

export async function whoami(ports: Pick<Ports, 'db'>, k: WhoamiKey): Promise<Whoami> {
  const { rows } = await ports.db.query<{ org_name: string | null; project_name: string | null; project_slug: string | null; key_name: string | null; user_id: string | null; email: string | null; display_name: string | null }>(
    `SELECT (SELECT name FROM orgs WHERE org_id = $1) AS org_name,
            p.name AS project_name, p.slug AS project_slug,
            (SELECT name FROM api_keys WHERE key_id = $3 AND org_id = $1) AS key_name,
            u.user_id, u.email, u.display_name
       FROM (SELECT 1) one
       LEFT JOIN projects p ON p.id = $2 AND p.org_id = $1
       LEFT JOIN LATERAL (SELECT user_id, email, display_name FROM users WHERE org_id = $1 AND role = 'owner' ORDER BY users.added_at, user_id LIMIT 1) u ON true`,
    [k.orgId, k.projectId, k.keyId],
  );
  const r = rows[0]!;
  return {
    org_id: k.orgId,
    project_id: k.projectId,
    api_key_id: k.keyId,
    environment: k.environment,
    scopes: k.scopes,
    user: r.user_id ? { id: r.user_id, email: r.email!, name: r.display_name, role: 'owner' } : null,
    organization: { id: k.orgId, name: r.org_name ?? k.orgId },
    project: { id: k.projectId, name: r.project_name ?? k.projectId, slug: r.project_slug },
    key: { id: k.keyId, name: r.key_name, environment: k.environment, scopes: k.scopes },
  };
}
