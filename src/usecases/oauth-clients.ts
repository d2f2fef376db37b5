import { OAUTH_PLATFORM_ORG, oauthClientDecider, oauthClientStream } from '../../commands/oauth.ts';
import { randomString } from '../ids.ts';
import type { Queryable } from '../postgres/db.ts';
import type { RunCommand } from './context.ts';

// OAuth public clients (RFC 7591): a registration as a fact of the platform
// (a client belongs to no organization), and the look-ups of the token
// endpoint and the consent page.

/** A registration's client metadata, checked (src/http/oauth/oauth-requests.ts). */
export type ClientMetadata = { redirectUris: string[]; grantTypes: string[]; responseTypes: string[]; clientName: string | null };

/** Registers a public client under a new id; the id. */
export async function registerOAuthClient(run: RunCommand, m: ClientMetadata): Promise<string> {
  const clientId = `ocl_${randomString(24)}`;
  const { redirectUris, grantTypes, responseTypes, clientName } = m;
  await run(oauthClientDecider, oauthClientStream(clientId), { type: 'register', clientId, clientName, redirectUris, grantTypes, responseTypes }, { orgId: OAUTH_PLATFORM_ORG, projectId: null, expectedRevision: 'no_stream' });
  return clientId;
}

export async function oauthClientKnown(db: Queryable, clientId: string): Promise<boolean> {
  const client = await db.query('SELECT 1 FROM oauth_clients WHERE client_id = $1', [clientId]);
  return client.rowCount !== 0;
}

/** The client's name and registered redirect URIs, for the consent page. */
export async function oauthClient(db: Queryable, clientId: string): Promise<{ client_name: string | null; redirect_uris: string[] } | undefined> {
  const { rows } = await db.query<{ client_name: string | null; redirect_uris: string[] }>('SELECT client_name, redirect_uris FROM oauth_clients WHERE client_id = $1', [clientId]);
  return rows[0];
}
