import type { Tenant } from '../usecases/context.ts';
import type { ApiKeyAuth, ServiceAuth } from './auth.ts';
import { projectResolutionFailed } from './errors.ts';
import type { Ctx } from './route.ts';

// A helper of the HTTP layer (registers no routes, any route module may import
// it): the tenant a request serves, from its credential.

/** The organization and project of a key, or of a service call (both resolved by the authenticator: x-svc-project, else the default project). */
export async function tenantOf(ctx: Pick<Ctx<unknown, unknown, unknown, ApiKeyAuth | ServiceAuth>, 'auth'>): Promise<Tenant> {
  const { auth } = ctx;
  if (auth.kind === 'api_key') return { orgId: auth.orgId, projectId: auth.projectId };
  if (!auth.projectId) throw projectResolutionFailed();
  return { orgId: auth.orgId, projectId: auth.projectId };
}
