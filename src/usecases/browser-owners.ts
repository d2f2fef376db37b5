import { randomBytes } from 'node:crypto';
import type { Db } from '../postgres/db.ts';
import { createMissingIndex, migrate } from '../postgres/schema.ts';
import type { SharedHoldings } from '../adapters/browser/slots.ts';
import { BROWSER_SLOT_MAX_AGE_MS } from '../limits.ts';
import type { Ports } from './context.ts';

// Which instance holds a browser context (issue 38). A hosted-connect session's
// live page and a signup run's paused page live in the process that opened
// them (a DevTools session, a screencast, a run's continuation waiting for its
// code): they cannot move. So each instance records, beside what it holds, its
// own id and the URL other instances reach it at; an instance that receives a
// request for something another holds forwards the request there and relays
// the answer (src/http/kernel/browser-forward.ts). Rows are operational state, not
// facts: an UNLOGGED table (a crash may empty it; what it pointed to was in a
// process's memory anyway). Keys: `hosted:<session id>`, `view:<SHA-256 of
// the live-view token>`, `signup:<run id>`. No secret is stored here.
//
// Beside them, browser_slots: one row per context an instance's worker holds,
// with its organization, so each instance counts an organization's share
// across all of them (src/adapters/browser/slots.ts). A row older than
// BROWSER_SLOT_MAX_AGE_MS is not counted (an instance that died without
// closing left it; no context lives that long).

export async function migrateBrowserOwners(db: Db): Promise<void> {
  await migrate(db, async (tx) => {
    await tx.query(`CREATE UNLOGGED TABLE IF NOT EXISTS browser_owners (
      key text PRIMARY KEY,
      instance_id text NOT NULL,
      instance_url text,
      claimed_at timestamptz NOT NULL DEFAULT now()
    )`);
    await tx.query(`CREATE UNLOGGED TABLE IF NOT EXISTS browser_slots (
      id text PRIMARY KEY,
      instance_id text NOT NULL,
      org_id text NOT NULL,
      held_since timestamptz NOT NULL DEFAULT now()
    )`);
    await createMissingIndex(tx, 'browser_slots_org', 'CREATE INDEX IF NOT EXISTS browser_slots_org ON browser_slots (org_id)');
  });
}

/** This instance's worker's holdings in browser_slots, and the others' read from there. */
export function sharedHoldings(deps: Ports): SharedHoldings {
  const self = selfOf(deps);
  return {
    async elsewhere(orgs) {
      const { rows } = await deps.db.query<{ org_id: string; n: number }>(
        `SELECT org_id, count(*)::int AS n FROM browser_slots WHERE org_id = ANY($1) AND instance_id <> $2 AND held_since > now() - make_interval(secs => $3) GROUP BY org_id`,
        [orgs, self.id, BROWSER_SLOT_MAX_AGE_MS / 1000],
      );
      return new Map(rows.map((r) => [r.org_id, r.n]));
    },
    async hold(id, org) {
      await deps.db.query('INSERT INTO browser_slots (id, instance_id, org_id) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING', [id, self.id, org]);
    },
    async drop(id) {
      await deps.db.query('DELETE FROM browser_slots WHERE id = $1 AND instance_id = $2', [id, self.id]);
    },
  };
}

/** This instance: an id minted per app, and the URL other instances reach it at (undefined: not reachable, say not listening). */
export type Self = { id: string; url: () => string | undefined };
const selves = new WeakMap<Ports, Self>();

/** Names where this app is reached (the routes know the server); before that, nothing is reachable. */
export function bindSelf(deps: Ports, url: () => string | undefined): void {
  const s = selfOf(deps);
  s.url = url;
}

export function selfOf(deps: Ports): Self {
  let s = selves.get(deps);
  if (!s) selves.set(deps, (s = { id: `inst_${randomBytes(8).toString('hex')}`, url: () => undefined }));
  return s;
}

/** The request should be answered by the instance at `url`, which holds `key`'s browser context. */
export class OwnedElsewhere extends Error {
  constructor(
    readonly url: string,
    readonly key: string,
  ) {
    super(`another instance (${url}) holds this browser context`);
  }
}

/** Records that this instance holds `keys` (replacing any stale claim). */
export async function claim(deps: Ports, keys: string[]): Promise<void> {
  const self = selfOf(deps);
  await deps.db.query(
    `INSERT INTO browser_owners (key, instance_id, instance_url) SELECT k, $2, $3 FROM unnest($1::text[]) AS k
     ON CONFLICT (key) DO UPDATE SET instance_id = EXCLUDED.instance_id, instance_url = EXCLUDED.instance_url, claimed_at = now()`,
    [keys, self.id, self.url() ?? null],
  );
}

/** This instance no longer holds `keys`. */
export async function release(deps: Ports, keys: string[]): Promise<void> {
  await deps.db.query('DELETE FROM browser_owners WHERE key = ANY($1) AND instance_id = $2', [keys, selfOf(deps).id]).catch(() => {});
}

/** This instance holds nothing any more (it closes). */
export async function releaseAll(deps: Ports): Promise<void> {
  await deps.db.query('DELETE FROM browser_owners WHERE instance_id = $1', [selfOf(deps).id]).catch(() => {});
  await deps.db.query('DELETE FROM browser_slots WHERE instance_id = $1', [selfOf(deps).id]).catch(() => {});
}

/** The owner of `key` could not be reached: its claim is dropped, whatever instance made it. */
export async function forget(deps: Ports, key: string): Promise<void> {
  await deps.db.query('DELETE FROM browser_owners WHERE key = $1', [key]).catch(() => {});
}

/**
 * Throws OwnedElsewhere when another instance claims `key` and can be reached
 * (`mayForward`: false for a request already forwarded once, so a stale claim
 * can never bounce a request between instances). A claim naming this
 * instance's own URL under another id is a previous process's: stale.
 */
export async function checkOwner(deps: Ports, key: string, mayForward: boolean): Promise<void> {
  if (!mayForward) return;
  const { rows } = await deps.db.query<{ instance_id: string; instance_url: string | null }>('SELECT instance_id, instance_url FROM browser_owners WHERE key = $1', [key]);
  const row = rows[0];
  const self = selfOf(deps);
  if (!row || row.instance_id === self.id || !row.instance_url || row.instance_url === self.url()) return;
  throw new OwnedElsewhere(row.instance_url, key);
}
