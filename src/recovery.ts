import { incidentDecider, incidentStream } from '../commands/audit.ts';
import { auditStream, derivedUuid } from './audit/chain.ts';
import type { ChainEvidence, Sealer } from './audit/sealer.ts';
import { SEALER_NAME } from './audit/sealer.ts';
import { forgetStates, handleCommand } from './eventstore/handler.ts';
import type { LogRewind, Position } from './eventstore/port.ts';
import { type PostgresEventStore } from './eventstore/postgres.ts';
import type { Db } from './postgres/db.ts';
import { listCheckpoints } from './projector/checkpoints.ts';
import type { Progress } from './projector/progress.ts';
import type { Projection } from './projector/projection.ts';
import { rebuildProjection, type ProjectionRunner } from './projector/runner.ts';

// When the database goes backwards (issue 46). PostgreSQL with
// synchronous_commit=off, or a failover to an asynchronously replicated
// standby, can come back without the last commits it acknowledged. The event
// store notices (an append or a read of the head finds the database's log head
// behind the head this process saw acknowledged: src/eventstore/postgres.ts)
// and refuses appends from then on (503 store_recovering, nothing written).
// This heals the process without a restart:
//  - stops the followers (projection runners, audit sealer),
//  - forgets every memory of the lost log: the store's heads, tail and
//    predictions, the command handler's folded states, the followers'
//    positions (Progress, and with it the read caches), the sealer's chains,
//  - repairs what the database itself may hold past its head (not after a real
//    loss, where checkpoints and read rows went with the log in the same WAL,
//    but never assumed): a projection whose checkpoint is past the head is
//    rebuilt from the log; a chain state row ahead of its stream is dropped
//    (reloaded from the stream); the sealer's checkpoint goes back to the head,
//  - starts the followers again from the database, accepts appends again,
//  - and says so: an audit incident (kind `log_rewound`) per organization whose
//    chain lost entries this process had seen, with the evidence (the heads,
//    the chain's size and last signed checkpoint known here against what the
//    database holds). Audit health is `broken` while it stays unacknowledged.
// A step that fails (the database unreachable again) is tried again; the
// store keeps refusing appends until every step succeeded.

export const REWIND_INCIDENT_KIND = 'log_rewound';

/** The length of an organization's chain as the database holds it: its head once switched to version 2, else its v1 stream's. */
const CHAIN_LENGTH = (org: string) =>
  `coalesce((SELECT h.sequence FROM audit_chain_head h WHERE h.org_id = ${org}), (SELECT max(e.stream_revision) + 1 FROM es_events e WHERE e.stream_name = 'audit-' || ${org}), 0)`;


export type RecoveryLog = (level: 'warn' | 'error' | 'info', msg: string, fields?: Record<string, unknown>) => void;

const defaultLog: RecoveryLog = (level, msg, fields) => process.stderr.write(JSON.stringify({ level, time: new Date().toISOString(), msg, ...fields }) + '\n');

export class Recovery {
  /** Each rewind this process went through, oldest first, and when it was healed. */
  readonly history: { rewind: LogRewind; healedAt: string | null; incidents: string[] }[] = [];
  /** Awaited (with the rewind) before anything is reloaded: a test holds the instance in recovery here. */
  hold: ((rewind: LogRewind) => Promise<void>) | undefined;
  private healing: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly db: Db,
    private readonly store: PostgresEventStore,
    private readonly parts: { progress: Progress; runners: readonly ProjectionRunner[]; sealer: Sealer; projections: readonly Projection[] },
    private readonly now: () => Date = () => new Date(),
    /** Where it says what happened (the server sets its logger here). */
    public log: RecoveryLog = defaultLog,
  ) {}

  install(): void {
    this.store.onRewind = (rewind) => {
      this.healing = this.heal(rewind).finally(() => (this.healing = undefined));
    };
  }

  /** Settles once the current healing (if any) is done. */
  async settled(): Promise<void> {
    await this.healing;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.store.onRewind) this.store.onRewind = undefined;
    await this.healing?.catch(() => {});
  }

  private async heal(rewind: LogRewind): Promise<void> {
    const entry = { rewind, healedAt: null as string | null, incidents: [] as string[] };
    this.history.push(entry);
    this.log('error', 'the database is behind what this instance already acknowledged: refusing writes and reloading state from the database', {
      known_head: rewind.knownHead,
      database_head: rewind.databaseHead,
      detected_on: rewind.where,
      check: 'synchronous replication and synchronous_commit (docs/deployment.md, "When the database goes backwards")',
    });
    // What this process knew of the chains, before it forgets it: the evidence.
    const chains = this.parts.sealer.knownChains();
    await this.hold?.(rewind);
    for (let attempt = 1; !this.stopped; attempt++) {
      try {
        await this.reload();
        break;
      } catch (err) {
        this.log('warn', 'reloading after the database went backwards failed; trying again', { attempt, error: err instanceof Error ? err.message : String(err) });
        await new Promise((r) => setTimeout(r, Math.min(5_000, 100 * attempt)));
      }
    }
    if (this.stopped) return;
    this.store.resume();
    entry.healedAt = this.now().toISOString();
    // Said in the audit chain itself; retried until recorded.
    for (let attempt = 1; !this.stopped; attempt++) {
      try {
        entry.incidents = await this.openIncidents(rewind, chains);
        break;
      } catch (err) {
        this.log('warn', 'recording the incident failed; trying again', { attempt, error: err instanceof Error ? err.message : String(err) });
        await new Promise((r) => setTimeout(r, Math.min(5_000, 100 * attempt)));
      }
    }
    this.log('warn', 'state reloaded from the database; accepting writes again', { database_head: rewind.databaseHead, incidents: entry.incidents });
  }

  /** Stops the followers, forgets the lost log, repairs what lies past the head, starts them again. */
  private async reload(): Promise<void> {
    const { progress, runners, sealer, projections } = this.parts;
    await sealer.stop();
    for (const r of runners) await r.stop();
    // The database's head now (the store checks it against nothing while recovering).
    const head = await this.store.headPosition();
    this.store.forgetFuture(head);
    forgetStates(this.store);
    await this.repairPastHead(head, projections);
    await progress.rewind();
    await sealer.rewind();
    for (const r of runners) await r.start();
  }

  /** What the database holds past its own log head: never after a real loss (one WAL), repaired if found. */
  private async repairPastHead(head: Position, projections: readonly Projection[]): Promise<void> {
    const byName = new Map(projections.map((p) => [p.name, p]));
    for (const cp of await listCheckpoints(this.db)) {
      if (cp.position <= head) continue;
      const p = byName.get(cp.name);
      if (p) {
        this.log('warn', 'a projection stood past the log head: rebuilding it from the log', { projection: p.name, checkpoint: cp.position, head });
        await rebuildProjection(this.db, this.store, p);
      } else if (cp.name === SEALER_NAME) {
        await this.db.query(`UPDATE checkpoints SET position = $2 WHERE name = $1 AND position > $2`, [SEALER_NAME, head]);
      }
    }
    // A chain's state row ahead of its stream: dropped with its tree, so the sealer reloads the chain from the stream.
    const { rows } = await this.db.query<{ org_id: string }>(
      `SELECT s.org_id FROM audit_chain_state s
       WHERE s.sequence > ${CHAIN_LENGTH('s.org_id')}`,
    );
    for (const r of rows) {
      await this.db.transaction(async (tx) => {
        await tx.query('DELETE FROM audit_tree_nodes WHERE org_id = $1', [r.org_id]);
        await tx.query('DELETE FROM audit_chain_state WHERE org_id = $1', [r.org_id]);
      });
    }
  }

  /** One incident per organization whose chain lost entries this process had seen; answers their ids. */
  private async openIncidents(rewind: LogRewind, chains: readonly ChainEvidence[]): Promise<string[]> {
    const ids: string[] = [];
    for (const c of chains) {
      const held = Number((await this.db.query<{ n: string }>(`SELECT ${CHAIN_LENGTH('$1::text')}::text AS n`, [c.orgId])).rows[0]!.n);
      if (c.sequence <= held) continue;
      const signed = (await this.db.query<{ size: string | null; root: string | null }>('SELECT checkpoint_size::text AS size, checkpoint_root AS root FROM audit_chain_state WHERE org_id = $1', [c.orgId])).rows[0];
      const detail =
        `The database lost commits this service had acknowledged: the event log ended at position ${Number(rewind.knownHead || 0)} as seen acknowledged here, ` +
        `and the database holds it to position ${Number(rewind.databaseHead || 0)}. This organization's audit chain had ${c.sequence} entries as seen here ` +
        `(last signed checkpoint known here: ${c.checkpoint ? `size ${c.checkpoint.size}, root ${c.checkpoint.root}` : 'none'}); the database holds ${held} entries ` +
        `(its last signed checkpoint: ${signed?.size ? `size ${signed.size}, root ${signed.root}` : 'none'}). Entries ${held + 1} to ${c.sequence} were lost with the writes they sealed. ` +
        `Check synchronous replication and synchronous_commit (docs/deployment.md).`;
      const incidentId = derivedUuid('incident', `${c.orgId}/${REWIND_INCIDENT_KIND}/${rewind.knownHead}/${rewind.databaseHead}`);
      const ctx = { orgId: c.orgId, projectId: null, actor: { kind: 'system' as const, id: 'log-rewind' }, requestId: null, now: this.now };
      await handleCommand(this.store, incidentDecider, incidentStream(incidentId), { type: 'open', incidentId, orgId: c.orgId, kind: REWIND_INCIDENT_KIND, sequence: held, detail }, ctx);
      ids.push(incidentId);
    }
    return ids;
  }
}
