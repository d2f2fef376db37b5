import { oauthGrantDecider, oauthGrantStream } from '../../commands/oauth.ts';
import { handleCommand } from '../eventstore/handler.ts';
import type { EventStore } from '../eventstore/port.ts';
import type { Db } from '../postgres/db.ts';
import { PeriodicReactor } from './periodic.ts';

// Revoking an API key revokes every OAuth grant made from it. Authentication
// already refuses a token whose key is revoked, at once; this reactor records
// the revocation of each such grant as a fact (`oauth_grant.revoked`, reason
// key_revoked). Revoking a revoked grant changes nothing, so reruns are harmless.

const BATCH = 200;

export class OAuthKeyRevocationReactor extends PeriodicReactor {
  constructor(
    private readonly db: Db,
    private readonly store: EventStore,
    private readonly now: () => Date,
    intervalMs = 1_000,
  ) {
    super(intervalMs);
  }

  protected async pass(): Promise<number> {
    const { rows } = await this.db
      .query<{ grant_id: string; org_id: string; project_id: string | null }>(
        `SELECT g.grant_id, g.org_id, g.project_id FROM oauth_grants g JOIN api_keys k ON k.key_id = g.key_id
         WHERE g.status <> 'revoked' AND k.revoked_at IS NOT NULL LIMIT ${BATCH}`,
      )
      .catch(() => ({ rows: [] as { grant_id: string; org_id: string; project_id: string | null }[] }));
    let moved = 0;
    for (const r of rows) {
      const at = this.now();
      const res = await handleCommand(
        this.store,
        oauthGrantDecider,
        oauthGrantStream(r.grant_id),
        { type: 'revoke', reason: 'key_revoked' },
        { orgId: r.org_id, projectId: r.project_id, actor: { kind: 'system', id: 'oauth-key-revocation' }, requestId: null, now: () => at },
        { serialize: true },
      );
      if (res.changed) moved++;
    }
    return moved;
  }
}
