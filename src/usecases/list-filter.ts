import type { Tenant } from './context.ts';

// The WHERE of a tenant-scoped list: the tenant first ($1 the organization, $2
// the project), the query's fixed parameters after them ($3 the limit, ...),
// then one `AND` per filter the caller gave, each with the next parameter.

export class ListFilter {
  readonly params: unknown[];
  where = 'org_id = $1 AND project_id = $2';

  constructor(tenant: Tenant, ...fixed: unknown[]) {
    this.params = [tenant.orgId, tenant.projectId, ...fixed];
  }

  /** Adds `sql`, its `?` the parameter `v`. */
  add(sql: string, v: unknown): void {
    this.params.push(v);
    this.where += ` AND ${sql.replace('?', () => `$${this.params.length}`)}`;
  }
}
