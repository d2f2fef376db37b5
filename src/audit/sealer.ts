import type { EventStore, ExpectedRevision, NewEvent, Position, RecordedEvent } from '../eventstore/port.ts';
import type { InlineTx } from '../eventstore/postgres.ts';
import { AppendTooLarge, DuplicateEventId, WrongExpectedRevision } from '../eventstore/port.ts';
import type { Db, Queryable } from '../postgres/db.ts';
import { ensureCheckpoint, PROGRESS_CHANNEL, readCheckpoint } from '../projector/checkpoints.ts';
import { batches } from '../projector/follow.ts';
import { CHECKPOINT_FLUSH_MS, pastHead } from '../projector/runner.ts';
import type { Progress } from '../projector/progress.ts';
import {
  type AuditEntry,
  auditStream,
  buildEntry,
  CHECKPOINT_EVENT_TYPE,
  checkpointStream,
  derivedUuid,
  ENTRY_EVENT_TYPE,
  genesisHash,
  isAuditStream,
  occurredAt,
} from './chain.ts';
import { leafHash, verifyConsistency } from './merkle.ts';
import { appendLeaves, consistencyProofFromStore, edgeFromJson, edgeRoot, edgeToJson, insertNodesSql, migrateTree, type Node, nodeParams, NODES_PER_STATEMENT, type RightEdge, storeNodes } from './tree.ts';
import { type SigningKey, signCheckpoint, verifierKey } from './note.ts';
import { LINK_MEMBER, LINK_RECORD_TYPE, type LinkRecordData, linkOf, linkRecordFor, SWITCH_EVENT_TYPE } from './link.ts';
import { ChainLinker, entryHashOf } from './linker.ts';
import { pooledHex } from '../ids.ts';
import { hmacSha256 } from './hash.ts';

// The audit sealer: one writer that reads the log in order and appends one
// entry per business event to its organization's chain `audit-<org_id>`, with
// expected revision = sequence - 2 (revisions are 0-based, sequences 1-based),
// so a chain is gapless and cannot fork. Entry ids derive from source event
// ids and each chain remembers the last source position it sealed, so a
// restart (the checkpoint lags the chain by one batch at most) never seals
// twice. It also signs a Merkle checkpoint every N entries or T seconds, each
// proven consistent with the previous one before it is signed.

export const SEALER_NAME = 'audit-sealer';

export type SealerOptions = {
  signingKey: SigningKey;
  /** Origin line of checkpoints; the organization id is appended. */
  origin?: string;
  checkpointEveryEntries?: number;
  checkpointIntervalMs?: number;
  now?: () => Date;
  /**
   * 2: a chain this sealer seals inline in an append transaction switches to
   * version 2 there (docs/audit-chain.md, "Version 2"). Chains already switched
   * are followed whatever this says.
   */
  format?: 1 | 2;
};

/** A linked event of a chain this process had cached behind: reloaded, never sealed on a stale tip. */
class ChainMoved extends Error {}

const isLinked = (e: RecordedEvent) => typeof (e.metadata as Record<string, unknown>)[LINK_MEMBER] === 'string';

type Chain = {
  orgId: string;
  sequence: number;
  tipHash: string;
  /** The tree's right edge: O(log n) hashes; every complete node is in audit_tree_nodes. */
  edge: RightEdge;
  lastSourcePosition: Position;
  lastCheckpoint: { size: number; root: Buffer } | null;
  lastCheckpointAt: number;
  lock: Promise<unknown>;
  /** 2 once the chain has switched (its head is in audit_chain_head); undefined until looked up. */
  format?: 1 | 2;
};

/** A chain as this process saw it acknowledged: its size and last signed checkpoint. */
export type ChainEvidence = { orgId: string; sequence: number; checkpoint: { size: number; root: string } | null };

export type CheckpointEventData = {
  org_id: string;
  size: number;
  root_hash: string;
  note: string;
  key_name: string;
  verifier_key: string;
  signed_at: string;
};

/** Appends one stream's events: through the store, or inside an inline append transaction. */
type Appender = (stream: string, events: NewEvent[], expectedRevision: ExpectedRevision) => Promise<Position>;
/** Reads a stream's last event: through the store, or inside an inline append transaction. */
type LastReader = (stream: string) => Promise<RecordedEvent | undefined>;

export class Sealer {
  /**
   * The chains this process has loaded. The append transaction's inline
   * sealing takes them from here and never waits for a load in flight (a
   * load reads through the pool, whose other connections may all be waiting
   * for that transaction's locks); what it does not find it loads itself,
   * through the transaction.
   */
  private readonly chains = new Map<string, Chain>();
  /** Loads in flight for the sealer's own loop (installed in `chains` unless a chain got there first). */
  private readonly loading = new Map<string, Promise<Chain>>();
  private abort = new AbortController();
  private loop: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private flusher: NodeJS.Timeout | undefined;
  private persisted: Position = '';
  private readonly origin: string;
  private readonly every: number;
  private readonly intervalMs: number;
  private readonly now: () => Date;
  position: Position = '';
  lastError: string | undefined;
  /** Awaited with the log position of a batch's last entry before the batch counts as sealed. */
  afterSeal: ((appended: Position) => Promise<unknown>) | undefined;

  constructor(
    private readonly db: Db,
    private readonly store: EventStore,
    private readonly opts: SealerOptions,
    private readonly progress?: Progress,
  ) {
    this.origin = opts.origin ?? 'agent-ledger/audit';
    this.every = opts.checkpointEveryEntries ?? 256;
    this.intervalMs = opts.checkpointIntervalMs ?? 10_000;
    this.now = opts.now ?? (() => new Date());
  }

  /** True while started: only a running sealer seals inline, in append transactions. */
  running = false;

  private readonly storeAppend: Appender = async (stream, events, expectedRevision) => (await this.store.appendToStream(stream, events, { expectedRevision })).lastPosition;
  private readonly storeLast: LastReader = async (stream) => (await this.store.readStream(stream, { direction: 'backwards', maxCount: 1 }))[0];

  async start(): Promise<void> {
    await ensureCheckpoint(this.db, SEALER_NAME, 'sealer', 1);
    await this.treeReady();
    this.running = true;
    this.abort = new AbortController();
    this.loop = this.run();
    this.timer = setInterval(() => void this.checkpointAll(false).catch(() => {}), Math.max(250, Math.floor(this.intervalMs / 2)));
    this.timer.unref();
    this.flusher = setInterval(() => void this.flush().catch(() => {}), CHECKPOINT_FLUSH_MS);
    this.flusher.unref();
  }

  async stop(): Promise<void> {
    this.running = false;
    clearInterval(this.timer);
    clearInterval(this.flusher);
    this.abort.abort();
    await this.loop;
    await this.flush().catch(() => {});
  }

  /** What this process knows of each chain it loaded: its size and the last checkpoint it signed or read (evidence when the database went backwards). */
  knownChains(): ChainEvidence[] {
    return [...this.acknowledged.values()];
  }

  /**
   * Each chain as this process last saw it committed (sealed and answered):
   * kept apart from `chains`, which forgets a chain whenever a transaction
   * that touched it rolls back.
   */
  private readonly acknowledged = new Map<string, ChainEvidence>();

  /** Records the chains of `orgs` as they stand now, once committed. */
  private acknowledge(orgs: Iterable<string>): void {
    for (const org of orgs) {
      const c = this.chains.get(org);
      if (!c) continue;
      const cur = this.acknowledged.get(org);
      if (cur && cur.sequence > c.sequence) continue;
      this.acknowledged.set(org, { orgId: org, sequence: c.sequence, checkpoint: c.lastCheckpoint ? { size: c.lastCheckpoint.size, root: c.lastCheckpoint.root.toString('hex') } : null });
    }
  }

  /**
   * Forgets every chain and position this process holds and starts again from
   * the database (its checkpoint row, the chains' state rows and streams):
   * after the database lost commits this process had seen (src/recovery.ts).
   */
  async rewind(): Promise<void> {
    await this.stop();
    this.chains.clear();
    this.loading.clear();
    this.acknowledged.clear();
    this.position = '';
    this.persisted = '';
    await this.start();
  }

  /**
   * The checkpoint row is written at most every CHECKPOINT_FLUSH_MS, never
   * backwards; after a restart the chains' own tips say what is already sealed.
   */
  private async flush(): Promise<void> {
    const target = this.position;
    // Inline sealing moves the checkpoint row itself.
    const row = this.progress?.rowPosition(SEALER_NAME) ?? '';
    if (row > this.persisted) this.persisted = row;
    if (target <= this.persisted) return;
    await this.db.transaction(async (tx) => {
      // Never past the log's head: a position read before the database lost commits (src/recovery.ts).
      if (await pastHead(this.db, this.store, tx, target)) return;
      await tx.query(`UPDATE checkpoints SET position = $2, status = 'running', error = NULL, updated_at = now() WHERE name = $1 AND position < $2`, [SEALER_NAME, target]);
      await tx.query('SELECT pg_notify($1, $2)', [PROGRESS_CHANNEL, SEALER_NAME]);
    });
    if (target > this.persisted) this.persisted = target;
  }

  private async run(): Promise<void> {
    const signal = this.abort.signal;
    while (!signal.aborted) {
      try {
        const cp = await readCheckpoint(this.db, SEALER_NAME);
        this.position = cp?.position ?? '';
        this.progress?.report(SEALER_NAME, this.position);
        this.persisted = this.position;
        for await (const batch of batches(this.store, this.position, signal)) {
          // What inline sealing (in append transactions) already covered needs nothing here.
          const known = this.progress?.position(SEALER_NAME) ?? '';
          const unseen = known > this.position ? batch.filter((e) => e.position > known) : batch;
          const appended = unseen.length > 0 ? await this.seal(unseen) : '';
          if (appended && this.afterSeal) await this.afterSeal(appended);
          const last = batch[batch.length - 1]!.position;
          this.position = last;
          this.lastError = undefined;
          this.progress?.report(SEALER_NAME, last);
        }
      } catch (err) {
        // Never skip: keep the checkpoint, retry from the log. A chain another
        // instance moved was already dropped (sealOrg); anything else may have
        // left any cached chain behind its row: forget them all.
        this.lastError = err instanceof Error ? err.message : String(err);
        if (!(err instanceof WrongExpectedRevision || err instanceof DuplicateEventId)) {
          this.chains.clear();
          this.loading.clear();
        }
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  /** Seals a batch of log events (in log order); audit streams themselves are skipped. Answers the position of the last entry written. */
  async seal(batch: readonly RecordedEvent[]): Promise<Position> {
    const byOrg = new Map<string, RecordedEvent[]>();
    for (const e of batch) {
      if (isAuditStream(e.streamName)) continue;
      const org = e.metadata.org_id;
      const list = byOrg.get(org);
      if (list) list.push(e);
      else byOrg.set(org, [e]);
    }
    const written = await Promise.all([...byOrg].map(([org, events]) => this.withChain(org, (chain) => this.sealOrg(chain, events, this.storeAppend))));
    this.acknowledge(byOrg.keys());
    return written.reduce((a, b) => (b > a ? b : a), '');
  }

  private async withChain<T>(orgId: string, fn: (c: Chain) => Promise<T>): Promise<T> {
    let chain = this.chains.get(orgId);
    if (!chain) {
      let pending = this.loading.get(orgId);
      if (!pending) {
        const load = this.loadChain(orgId);
        pending = load;
        this.loading.set(orgId, load);
        const done = () => {
          if (this.loading.get(orgId) === load) this.loading.delete(orgId);
        };
        load.then((loaded) => {
          // A chain loaded meanwhile by inline sealing (under the log-head lock) is at least as recent.
          if (this.loading.get(orgId) === load && !this.chains.has(orgId)) this.chains.set(orgId, loaded);
          done();
        }, done);
      }
      const loaded = await pending;
      chain = this.chains.get(orgId) ?? loaded;
    }
    const c = chain;
    const run = c.lock.then(() => fn(c));
    c.lock = run.catch(() => {});
    return run;
  }

  /**
   * A chain's state comes from its stored row (constant size: tip, right edge,
   * last checkpoint), then the few entries appended after the row was last
   * written (a crash between the chain append and the row update) are read
   * from the chain and applied. A chain without a row (first start) is read
   * once from its beginning.
   */
  private migrated: Promise<void> | undefined;
  /** The tree tables exist (also when `seal` is driven without `start`, as the benches do). */
  private treeReady(): Promise<void> {
    this.migrated ??= migrateTree(this.db).catch((err) => {
      this.migrated = undefined;
      throw err;
    });
    return this.migrated;
  }

  private async loadChain(orgId: string): Promise<Chain> {
    await this.treeReady();
    const chain: Chain = {
      orgId,
      sequence: 0,
      tipHash: genesisHash(orgId),
      edge: new Map(),
      lastSourcePosition: '',
      lastCheckpoint: null,
      lastCheckpointAt: Date.now(),
      lock: Promise.resolve(),
    };
    const row = await this.applyStateRow(this.db, chain);
    let from = BigInt(chain.sequence);
    let caughtUp = false;
    for (;;) {
      const page = await this.store.readStream(auditStream(orgId), { fromRevision: from, maxCount: 5000 });
      if (page.length > 0) {
        const hashes: Buffer[] = [];
        for (const e of page) {
          const stored = storedEntryOf(e);
          hashes.push(leafHash(Buffer.from(stored.entryHash, 'hex')));
          chain.sequence = Number(e.revision) + 1;
          chain.tipHash = stored.entryHash;
          if (stored.sourcePosition !== undefined) chain.lastSourcePosition = stored.sourcePosition;
          if (stored.linked) chain.format = 2;
        }
        await storeNodes(this.db, orgId, appendLeaves(Number(page[0]!.revision), hashes, chain.edge));
        caughtUp = true;
      }
      if (page.length < 5000) break;
      from = page[page.length - 1]!.revision + 1n;
    }
    if (await this.catchUpLinked(chain)) caughtUp = true;
    // EventStoreDB: a chain whose stream ends on a link record (or its switch) has switched.
    if (this.store.kind !== 'postgres' && chain.format === undefined && chain.sequence > 0) {
      const last = await this.storeLast(auditStream(orgId));
      if (last && storedEntryOf(last).linked) chain.format = 2;
    }
    const [last] = await this.store.readStream(checkpointStream(orgId), { direction: 'backwards', maxCount: 1 });
    if (last) {
      const d = last.data as unknown as CheckpointEventData;
      chain.lastCheckpoint = { size: d.size, root: Buffer.from(d.root_hash, 'hex') };
    }
    if (caughtUp || !row) await this.saveState(this.db, chain);
    return chain;
  }

  /**
   * A switched chain whose state row is behind its head (dropped by a
   * recovery, or never written): its linked entries after the row are read
   * from the log, in order, from the row's last source. Only then; a chain
   * whose row is current reads nothing. Answers whether it moved.
   */
  private async catchUpLinked(chain: Chain): Promise<boolean> {
    const { rows } = await this.db.query<{ sequence: string }>('SELECT sequence::text FROM audit_chain_head WHERE org_id = $1', [chain.orgId]);
    if (!rows[0]) return false;
    chain.format = 2;
    const head = Number(rows[0].sequence);
    if (chain.sequence >= head) return false;
    const hashes: Buffer[] = [];
    const start = chain.sequence;
    for await (const e of this.store.iterateAll({ after: chain.lastSourcePosition })) {
      if (e.metadata?.org_id !== chain.orgId || !isLinked(e)) continue;
      const link = linkOf(e);
      if (!link || link.sequence_number <= chain.sequence) continue;
      if (link.sequence_number !== chain.sequence + 1 || link.prev_hash !== chain.tipHash) throw new Error(`audit chain ${chain.orgId}: linked entry ${link.sequence_number} does not follow ${chain.sequence}`);
      chain.tipHash = entryHashOf(e)!;
      chain.sequence++;
      chain.lastSourcePosition = e.position;
      hashes.push(leafHash(Buffer.from(chain.tipHash, 'hex')));
      if (chain.sequence >= head) break;
    }
    await storeNodes(this.db, chain.orgId, appendLeaves(start, hashes, chain.edge));
    return chain.sequence > start;
  }

  /** Fills a chain from its stored state row; answers whether there was one. */
  private async applyStateRow(q: Queryable, chain: Chain): Promise<boolean> {
    const { rows } = await q.query<{ sequence: string; tip_hash: string; last_source_position: string; right_edge: Record<string, string>; checkpoint_size: string | null; checkpoint_root: string | null }>(
      'SELECT sequence::text, tip_hash, last_source_position, right_edge, checkpoint_size::text, checkpoint_root FROM audit_chain_state WHERE org_id = $1',
      [chain.orgId],
    );
    const row = rows[0];
    if (!row) return false;
    chain.sequence = Number(row.sequence);
    chain.tipHash = row.tip_hash;
    chain.lastSourcePosition = row.last_source_position;
    chain.edge = edgeFromJson(row.right_edge);
    if (row.checkpoint_size !== null && row.checkpoint_root !== null) chain.lastCheckpoint = { size: Number(row.checkpoint_size), root: Buffer.from(row.checkpoint_root, 'hex') };
    return true;
  }

  private static readonly SAVE_STATE = `INSERT INTO audit_chain_state (org_id, sequence, tip_hash, last_source_position, right_edge, checkpoint_size, checkpoint_root, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, now())
       ON CONFLICT (org_id) DO UPDATE SET sequence = EXCLUDED.sequence, tip_hash = EXCLUDED.tip_hash, last_source_position = EXCLUDED.last_source_position,
         right_edge = EXCLUDED.right_edge, updated_at = now(),
         checkpoint_size = GREATEST(audit_chain_state.checkpoint_size, EXCLUDED.checkpoint_size),
         checkpoint_root = CASE WHEN EXCLUDED.checkpoint_size > COALESCE(audit_chain_state.checkpoint_size, -1) THEN EXCLUDED.checkpoint_root ELSE audit_chain_state.checkpoint_root END,
         checkpoint_at = CASE WHEN EXCLUDED.checkpoint_size > COALESCE(audit_chain_state.checkpoint_size, -1) THEN now() ELSE audit_chain_state.checkpoint_at END
       WHERE audit_chain_state.sequence <= EXCLUDED.sequence`;

  private stateParams(chain: Chain): unknown[] {
    return [chain.orgId, chain.sequence, chain.tipHash, chain.lastSourcePosition, JSON.stringify(edgeToJson(chain.edge)), chain.lastCheckpoint?.size ?? null, chain.lastCheckpoint?.root.toString('hex') ?? null];
  }

  private async saveState(q: Queryable, chain: Chain): Promise<void> {
    await q.query(Sealer.SAVE_STATE, this.stateParams(chain));
  }

  /** The tree's new nodes and the chain's state row, in one statement when the nodes are few (one batch's). */
  private async saveNodesAndState(q: Queryable, chain: Chain, nodes: readonly Node[]): Promise<void> {
    if (nodes.length === 0 || nodes.length > NODES_PER_STATEMENT) {
      await storeNodes(q, chain.orgId, nodes);
      return this.saveState(q, chain);
    }
    await q.query(`WITH nodes AS (${insertNodesSql('$1', '$8', '$9', '$10')}) ${Sealer.SAVE_STATE}`, [...this.stateParams(chain), ...nodeParams(nodes)], { name: 'audit_nodes_state' });
  }

  /**
   * A payload commitment's salt. On EventStoreDB it is derived from the
   * event's id under the signing key (HMAC, domain-separated): two sealers
   * sealing the same events write the same entries, because EventStoreDB
   * answers a re-append of written event ids as a success (idempotence), and
   * a sealer that lost the race must then hold exactly what the winner wrote.
   * Unguessable without the key, as a random salt. PostgreSQL refuses the
   * re-append instead: a random salt.
   */
  private saltFor(eventId: string): string {
    if (this.store.kind === 'postgres') return pooledHex(16);
    return hmacSha256(this.opts.signingKey.secretKey, 'agent-ledger/audit-salt\n', eventId).subarray(0, 16).toString('hex');
  }

  /** The entries sealing `fresh` on top of the chain, as events to append; the chain itself is not changed. */
  private entriesFor(chain: Chain, fresh: readonly RecordedEvent[]): { entries: AuditEntry[]; newEvents: NewEvent[]; prev: string; seq: number } {
    const entries: AuditEntry[] = [];
    let prev = chain.tipHash;
    let seq = chain.sequence;
    for (const e of fresh) {
      const entry = buildEntry(e, ++seq, prev, this.saltFor(e.id));
      entries.push(entry);
      prev = entry.entry_hash;
    }
    const at = this.now().toISOString();
    const newEvents: NewEvent[] = entries.map((entry) => ({
      id: derivedUuid('entry', entry.source.event_id),
      type: ENTRY_EVENT_TYPE,
      data: entry as unknown as NewEvent['data'],
      metadata: { org_id: chain.orgId, actor: { kind: 'system', id: SEALER_NAME }, causation_id: entry.source.event_id, occurred_at: at, schema_version: 1 },
    }));
    return { entries, newEvents, prev, seq };
  }

  /** Whether sealing up to `sequence` makes a signed checkpoint due (maybeCheckpoint's rule). */
  private checkpointDue(chain: Chain, sequence: number): boolean {
    const lastSize = chain.lastCheckpoint?.size ?? 0;
    return sequence - lastSize >= this.every || Date.now() - chain.lastCheckpointAt >= this.intervalMs;
  }

  /**
   * Seals one organization's events. `q` is the inline append transaction when
   * sealing inside it: the tree's nodes and the state row then commit with the
   * entries; otherwise they are written in a transaction of their own after the
   * append (a crash in between is repaired at load from the chain itself).
   */
  private async sealOrg(chain: Chain, events: readonly RecordedEvent[], append: Appender, q?: Queryable, last?: LastReader): Promise<Position> {
    // In log order: unlinked events (a v1 chain) get entries appended; linked ones (v2) are entries already.
    let written: Position = '';
    for (let i = 0; i < events.length; ) {
      const linked = isLinked(events[i]!);
      let j = i + 1;
      while (j < events.length && isLinked(events[j]!) === linked) j++;
      const run = events.slice(i, j);
      const p = linked ? await this.sealLinked(chain, run, append, q, last) : await this.sealEntries(chain, run, append, q, last);
      if (p > written) written = p;
      i = j;
    }
    return written;
  }

  /**
   * Linked events (version 2): each is its own entry, linked on the one before
   * by its writer under the database's check; the tree and the chain's state
   * follow them. A link that does not follow this process's cached tip means
   * another process moved the chain: the chain is reloaded (ChainMoved).
   */
  private async sealLinked(chain: Chain, events: readonly RecordedEvent[], append: Appender, q?: Queryable, last?: LastReader): Promise<Position> {
    const fresh = events.filter((e) => e.position > chain.lastSourcePosition);
    if (fresh.length === 0) return '';
    const hashes: string[] = [];
    let seq = chain.sequence;
    let tip = chain.tipHash;
    for (const e of fresh) {
      const link = linkOf(e);
      if (!link || link.sequence_number !== seq + 1 || link.prev_hash !== tip) {
        this.chains.delete(chain.orgId);
        throw new ChainMoved(`audit chain ${chain.orgId}: linked entry ${link?.sequence_number ?? '?'} does not follow ${seq}`);
      }
      tip = entryHashOf(e)!;
      seq++;
      hashes.push(tip);
    }
    const edge = new Map(chain.edge);
    const nodes = appendLeaves(chain.sequence, hashes.map((h) => leafHash(Buffer.from(h, 'hex'))), edge);
    Object.assign(chain, { edge, sequence: seq, tipHash: tip, lastSourcePosition: fresh[fresh.length - 1]!.position, format: 2 });
    if (q) await this.saveNodesAndState(q, chain, nodes);
    else await this.db.transaction((tx) => this.saveNodesAndState(tx, chain, nodes));
    await this.maybeCheckpoint(chain, false, append, q, last);
    // The last entry is the last fact itself: the audit read model's row for it is what `afterSeal` waits for.
    return fresh[fresh.length - 1]!.position;
  }

  /**
   * Switches a v1 chain to version 2 inside an append transaction: the switch
   * event, itself entry `sequence + 1`, linked on the last v1 entry, appended
   * only if no switch exists and the v1 chain still ends where this process
   * sealed it (its guard); es_append then records the chain's head. It takes
   * the time of the latest fact it follows (`sealed`, the batch just sealed),
   * not this process's clock: the chain's times then stay in order around it
   * whatever clock each writer had, which the verification windows rely on
   * (they find a window's entries by `happened_at`).
   */
  private async switchChain(tx: InlineTx, chain: Chain, sealed: readonly RecordedEvent[]): Promise<RecordedEvent> {
    const s = chain.sequence + 1;
    const at = sealed.reduce((latest, e) => (occurredAt(e) > latest ? occurredAt(e) : latest), '');
    const { stream, event } = ChainLinker.switchEvent(chain.orgId, s, chain.tipHash, derivedUuid('switch', chain.orgId), at || this.now().toISOString());
    const [r] = await tx.append([
      { stream, events: [event as NewEvent], expectedRevision: 'no_stream', guard: { stream: auditStream(chain.orgId), revision: chain.sequence === 0 ? 'no_stream' : BigInt(chain.sequence - 1) } },
    ]);
    if (!r!.ok) {
      this.chains.delete(chain.orgId);
      throw new ChainMoved(`audit chain ${chain.orgId}: switched or moved by another process`);
    }
    const sw = r!.events[0]!;
    const tip = entryHashOf(sw)!;
    const edge = new Map(chain.edge);
    const nodes = appendLeaves(chain.sequence, [leafHash(Buffer.from(tip, 'hex'))], edge);
    Object.assign(chain, { edge, sequence: s, tipHash: tip, lastSourcePosition: sw.position, format: 2 });
    await this.saveNodesAndState(tx, chain, nodes);
    return sw;
  }

  /**
   * Version 2 on a store that cannot link a fact in its own append
   * (EventStoreDB): each fact's link is written by this sealer as the next
   * event of the chain's stream (a link record), after the switch, which is
   * itself appended there; docs/audit-chain.md, "Version 2 on EventStoreDB".
   */
  private linksBeside(chain: Chain): boolean {
    return this.store.kind !== 'postgres' && (chain.format === 2 || this.opts.format === 2);
  }

  /** The link records sealing `fresh` on top of the chain (the switch first if it has not switched); the chain itself is not changed. */
  private linkRecordsFor(chain: Chain, fresh: readonly RecordedEvent[]): { entries: { entry_hash: string }[]; newEvents: NewEvent[]; prev: string; seq: number } {
    const stream = auditStream(chain.orgId);
    const newEvents: NewEvent[] = [];
    const entries: { entry_hash: string }[] = [];
    let prev = chain.tipHash;
    let seq = chain.sequence;
    const at = this.now().toISOString();
    const meta = { org_id: chain.orgId, actor: { kind: 'system', id: SEALER_NAME }, occurred_at: at, schema_version: 1 };
    if (chain.format !== 2) {
      // The switch takes the time of the first fact after it (the chain's times stay in order around it).
      const swId = derivedUuid('switch', chain.orgId);
      const sw = ChainLinker.switchEvent(chain.orgId, ++seq, prev, swId, occurredAt(fresh[0]!), stream, this.saltFor(swId));
      prev = entryHashOf({ ...sw.event, streamName: stream, revision: -1n, position: '', recordedAt: '' } as RecordedEvent)!;
      entries.push({ entry_hash: prev });
      newEvents.push(sw.event as NewEvent);
    }
    for (const e of fresh) {
      const { data, entryHash } = linkRecordFor(e, ++seq, prev, this.saltFor(e.id));
      prev = entryHash;
      entries.push({ entry_hash: entryHash });
      newEvents.push({ id: derivedUuid('link', e.id), type: LINK_RECORD_TYPE, data: data as unknown as NewEvent['data'], metadata: { ...meta, causation_id: e.id } });
    }
    return { entries, newEvents, prev, seq };
  }

  private async sealEntries(chain: Chain, events: readonly RecordedEvent[], append: Appender, q?: Queryable, last?: LastReader): Promise<Position> {
    // After a restart the checkpoint may lag the chain: skip what is already sealed.
    const fresh = events.filter((e) => e.position > chain.lastSourcePosition);
    if (fresh.length === 0) return '';
    const beside = this.linksBeside(chain);
    const { entries, newEvents, prev, seq } = beside ? this.linkRecordsFor(chain, fresh) : this.entriesFor(chain, fresh);
    let appended: Position;
    try {
      appended = await append(auditStream(chain.orgId), newEvents, chain.sequence === 0 ? 'no_stream' : BigInt(chain.sequence - 1));
    } catch (err) {
      if (err instanceof AppendTooLarge && err.refusedBy === 'port' && err.atEvent !== undefined && err.atEvent > 0) {
        // The entries pass the most one append may carry (a backlog of one
        // organization): the store refused them before writing anything, so
        // they are sealed as several appends, in order.
        await this.sealEntries(chain, fresh.slice(0, err.atEvent), append, q, last);
        return this.sealEntries(chain, fresh.slice(err.atEvent), append, q, last);
      }
      if (err instanceof WrongExpectedRevision || err instanceof DuplicateEventId) {
        // The chain moved under us (another sealer, or a restart): reload and let the loop retry.
        this.chains.delete(chain.orgId);
      }
      throw err;
    }
    const edge = new Map(chain.edge);
    const nodes = appendLeaves(chain.sequence, entries.map((entry) => leafHash(Buffer.from(entry.entry_hash, 'hex'))), edge);
    chain.edge = edge;
    chain.sequence = seq;
    chain.tipHash = prev;
    chain.lastSourcePosition = fresh[fresh.length - 1]!.position;
    if (beside) chain.format = 2;
    // The tree's nodes and the chain's constant-size state, together.
    if (q) await this.saveNodesAndState(q, chain, nodes);
    else await this.db.transaction((tx) => this.saveNodesAndState(tx, chain, nodes));
    await this.maybeCheckpoint(chain, false, append, q, last);
    return appended;
  }

  /**
   * Seals a batch inside an append transaction (the log-head row is locked, so
   * no other writer moves a chain meanwhile). Each chain cached here is first
   * brought up to date from its stream in the transaction (entries another
   * process sealed since), then extended; the entries are appended in the same
   * transaction. Answers the recorded entries (and any signed checkpoints).
   * If the transaction does not commit, `forget` drops the touched chains.
   */
  async sealInline(
    tx: InlineTx,
    batch: readonly RecordedEvent[],
    alongside?: (entries: RecordedEvent[]) => Promise<unknown>,
    opts: { final?: boolean } = {},
  ): Promise<{ written: RecordedEvent[]; forget: () => void; landed: () => void; alongside: boolean; settled?: Promise<void> }> {
    const byOrg = new Map<string, RecordedEvent[]>();
    for (const e of batch) {
      if (isAuditStream(e.streamName)) continue;
      const list = byOrg.get(e.metadata.org_id);
      if (list) list.push(e);
      else byOrg.set(e.metadata.org_id, [e]);
    }
    const touched = [...byOrg.keys()];
    // Called once the append transaction committed.
    const landed = () => this.acknowledge(touched);
    const forget = () => {
      for (const org of touched) {
        this.chains.delete(org);
        this.loading.delete(org);
      }
    };
    if (alongside) {
      try {
        const planned = await this.sealPlanned(tx, byOrg, batch, alongside, opts.final === true);
        if (planned && 'settled' in planned) {
          // Final: the answers arrive before the COMMIT's; a failure there fails the transaction.
          planned.settled.catch(() => forget());
          return { written: planned.predicted, forget, landed, alongside: true, settled: planned.settled };
        }
        if (planned) return { written: planned, forget, landed, alongside: true };
      } catch (err) {
        forget();
        throw err;
      }
    }
    const written: RecordedEvent[] = [];
    const append: Appender = async (stream, events, expectedRevision) => {
      const [r] = await tx.append([{ stream, events, expectedRevision }]);
      if (!r!.ok) throw new WrongExpectedRevision(stream, expectedRevision, r!.actual);
      written.push(...r!.events);
      return r!.events[r!.events.length - 1]!.position;
    };
    const txLast: LastReader = (stream) => tx.readLast(stream);
    try {
      for (const [org, events] of byOrg) {
        let chain = this.chains.get(org);
        if (!chain) {
          // From the stored state row (constant size), then the entries after it, through the transaction.
          const loaded = this.emptyChain(org);
          await this.applyStateRow(tx, loaded);
          await this.catchUpChain(tx, loaded, true);
          this.chains.set(org, loaded);
          chain = loaded;
        }
        try {
          // Optimistic: the append's expected revision checks the cached tip.
          await this.sealOrg(chain, events, append, tx, txLast);
        } catch (err) {
          if (err instanceof ChainMoved) {
            // Another process linked entries since: the chain as its state row has it (written in the same transactions as they were).
            const reloaded = this.emptyChain(org);
            await this.applyStateRow(tx, reloaded);
            await this.catchUpChain(tx, reloaded, true);
            this.chains.set(org, reloaded);
            chain = reloaded;
            await this.sealOrg(chain, events, append, tx, txLast);
          } else {
            if (!(err instanceof WrongExpectedRevision)) throw err;
            // Another process sealed since: read its entries from our tip and seal on top.
            const fresh = this.emptyChain(org);
            Object.assign(fresh, { sequence: chain.sequence, tipHash: chain.tipHash, edge: new Map(chain.edge), lastSourcePosition: chain.lastSourcePosition, lastCheckpoint: chain.lastCheckpoint });
            this.chains.set(org, fresh);
            chain = fresh;
            await this.catchUpChain(tx, fresh, true);
            await this.sealOrg(fresh, events, append, tx, txLast);
          }
        }
        if (this.opts.format === 2 && chain.format !== 2) {
          chain.format ??= (await tx.query('SELECT 1 FROM audit_chain_head WHERE org_id = $1', [org])).rowCount ? 2 : 1;
          // Every event of the organization before this point is sealed (this sealer stood at the head before the batch): the chain switches here.
          if (chain.format !== 2) written.push(await this.switchChain(tx, chain, events));
        }
      }
    } catch (err) {
      forget();
      throw err;
    }
    return { written, forget, landed, alongside: false };
  }

  /**
   * The common case of sealInline in one round trip: every chain it touches is
   * cached here and no checkpoint is due. Behind a savepoint, each
   * organization's entries are appended where they must land (right after the
   * batch, in order), a statement fails unless they did, and the tree's nodes
   * and the chain's state follow; `alongside` then issues its statements (the
   * projections') on the entries as they will be recorded, all without waiting
   * for an answer in between. If an append is refused (another process sealed
   * since) or anything fails, the transaction goes back to the savepoint and
   * this answers undefined: the caller seals one chain at a time, reading
   * what it missed. Answers the entries as recorded.
   *
   * `final`: nothing else is issued in the transaction before its COMMIT,
   * which may travel right behind these statements (the store knows no other
   * process appended since its last commit, so no chain moved): no savepoint
   * and no waiting. Answers the entries as they will be recorded and a promise
   * settled once the statements are answered (rejected if they failed: the
   * COMMIT then rolls back).
   */
  private async sealPlanned(
    tx: InlineTx,
    byOrg: ReadonlyMap<string, RecordedEvent[]>,
    batch: readonly RecordedEvent[],
    alongside: (entries: RecordedEvent[]) => Promise<unknown>,
    final: boolean,
  ): Promise<RecordedEvent[] | { predicted: RecordedEvent[]; settled: Promise<void> } | undefined> {
    type Plan = { chain: Chain; next: Chain; newEvents: NewEvent[]; entries: AuditEntry[]; nodes: Node[]; positions: Position[] };
    const plans: Plan[] = [];
    let after = batch[batch.length - 1]!.position;
    for (const [org, events] of byOrg) {
      const chain = this.chains.get(org);
      if (!chain) return undefined;
      const fresh = events.filter((e) => e.position > chain.lastSourcePosition);
      if (fresh.length === 0) continue;
      const linked = isLinked(fresh[0]!);
      // A chain to switch, or a run of both kinds: the slow way (sealOrg).
      if (fresh.some((e) => isLinked(e) !== linked) || (!linked && this.opts.format === 2 && chain.format !== 2)) return undefined;
      let hashes: string[];
      let newEvents: NewEvent[] = [];
      let entries: AuditEntry[] = [];
      let prev: string;
      let seq: number;
      if (linked) {
        // Entries already: the tree and the state follow their links (which must follow the cached tip).
        hashes = [];
        prev = chain.tipHash;
        seq = chain.sequence;
        for (const e of fresh) {
          const link = linkOf(e);
          if (!link || link.sequence_number !== seq + 1 || link.prev_hash !== prev) return undefined;
          prev = entryHashOf(e)!;
          seq++;
          hashes.push(prev);
        }
      } else {
        ({ entries, newEvents, prev, seq } = this.entriesFor(chain, fresh));
        hashes = entries.map((entry) => entry.entry_hash);
      }
      if (this.checkpointDue(chain, seq)) return undefined;
      const edge = new Map(chain.edge);
      const nodes = appendLeaves(chain.sequence, hashes.map((h) => leafHash(Buffer.from(h, 'hex'))), edge);
      if (nodes.length > NODES_PER_STATEMENT) return undefined;
      const positions = newEvents.length > 0 ? tx.positionsAfter(after, newEvents.length) : [];
      if (positions.length > 0) after = positions[positions.length - 1]!;
      plans.push({ chain, next: { ...chain, edge, sequence: seq, tipHash: prev, lastSourcePosition: fresh[fresh.length - 1]!.position, ...(linked ? { format: 2 as const } : {}) }, newEvents, entries, nodes, positions });
    }
    if (plans.length === 0) return undefined;
    const recordedAt = batch[0]!.recordedAt;
    const predicted = plans.flatMap((plan) =>
      plan.newEvents.map(
        (e, k): RecordedEvent => ({
          id: e.id!,
          type: e.type,
          streamName: auditStream(plan.chain.orgId),
          revision: BigInt(plan.chain.sequence + k),
          position: plan.positions[k]!,
          data: e.data,
          metadata: e.metadata,
          recordedAt,
        }),
      ),
    );
    // Every statement is issued before any answer is awaited (the transaction pipelines).
    const issued: Promise<unknown>[] = final ? [] : [tx.savepoint('sealer_planned')];
    const appends = plans.flatMap((plan) => {
      const appended =
        plan.newEvents.length > 0 ? tx.append([{ stream: auditStream(plan.chain.orgId), events: plan.newEvents, expectedRevision: plan.chain.sequence === 0 ? 'no_stream' : BigInt(plan.chain.sequence - 1) }]) : undefined;
      if (appended) issued.push(tx.expectAt(plan.newEvents[plan.newEvents.length - 1]!.id!, plan.positions[plan.positions.length - 1]!));
      issued.push(this.saveNodesAndState(tx, plan.next, plan.nodes));
      return appended ? [appended] : [];
    });
    issued.push(alongside(predicted));
    let failure: unknown;
    const answered = Promise.allSettled([...appends, ...issued]).then(async (settled) => {
      failure = (settled.find((r) => r.status === 'rejected') as PromiseRejectedResult | undefined)?.reason;
      const landed = failure === undefined;
      const results = landed ? await Promise.all(appends) : [];
      const written = results.flatMap(([r]) => (r!.ok ? r!.events : []));
      if (!landed || written.length !== predicted.length || written.some((e, i) => e.position !== predicted[i]!.position || e.id !== predicted[i]!.id)) return undefined;
      for (const plan of plans) Object.assign(plan.chain, { edge: plan.next.edge, sequence: plan.next.sequence, tipHash: plan.next.tipHash, lastSourcePosition: plan.next.lastSourcePosition, format: plan.next.format });
      return written;
    });
    if (final) {
      const settled = answered.then((written) => {
        if (!written) throw failure ?? new Error('the planned seal did not land as planned');
      });
      settled.catch(() => {});
      return { predicted, settled };
    }
    const written = await answered;
    if (!written) {
      await tx.rollbackTo('sealer_planned');
      return undefined;
    }
    return written;
  }

  private emptyChain(orgId: string): Chain {
    return { orgId, sequence: 0, tipHash: genesisHash(orgId), edge: new Map(), lastSourcePosition: '', lastCheckpoint: null, lastCheckpointAt: Date.now(), lock: Promise.resolve() };
  }

  /** Reads the entries appended after the cached tip (none, unless another process sealed), and the last checkpoint when they moved it. */
  private async catchUpChain(tx: InlineTx, chain: Chain, fresh: boolean): Promise<void> {
    let moved = false;
    for (;;) {
      const page = await tx.readStream(auditStream(chain.orgId), BigInt(chain.sequence), 5000);
      for (const e of page) {
        const entry = e.data as unknown as AuditEntry;
        if (entry.sequence_number !== chain.sequence + 1) throw new Error(`audit chain ${chain.orgId}: entry ${entry.sequence_number} after ${chain.sequence}`);
        await storeNodes(tx, chain.orgId, appendLeaves(chain.sequence, [leafHash(Buffer.from(entry.entry_hash, 'hex'))], chain.edge));
        chain.sequence = entry.sequence_number;
        chain.tipHash = entry.entry_hash;
        chain.lastSourcePosition = entry.source.position;
        moved = true;
      }
      if (page.length < 5000) break;
    }
    if (moved || fresh) {
      const last = await tx.readLast(checkpointStream(chain.orgId));
      if (last) {
        const d = last.data as unknown as CheckpointEventData;
        chain.lastCheckpoint = { size: d.size, root: Buffer.from(d.root_hash, 'hex') };
      }
    }
  }

  /**
   * Signs a checkpoint for every chain with unsigned entries (`force`), or
   * those due (entries or time since the last signature), whichever instance
   * sealed them: the due chains are read from their state rows, not from this
   * process's cache, so with several instances every chain is signed on
   * schedule. One signer per chain at a time across instances (an advisory
   * lock it only tries); the checkpoint's id derives from its size, so a
   * signature raced by inline sealing is recorded once.
   */
  async checkpointAll(force: boolean): Promise<void> {
    const { rows } = await this.db.query<{ org_id: string }>(`SELECT org_id FROM audit_chain_state WHERE ${Sealer.DUE} ORDER BY org_id`, [force, this.every, this.intervalMs]);
    for (const { org_id } of rows) await this.signIfDue(org_id, force);
  }

  private static readonly DUE = `sequence > COALESCE(checkpoint_size, 0)
    AND ($1::boolean OR sequence - COALESCE(checkpoint_size, 0) >= $2 OR checkpoint_at <= now() - make_interval(secs => $3 / 1000.0))`;

  private async signIfDue(orgId: string, force: boolean): Promise<void> {
    await this.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock(hashtext($1)) AS ok', [`audit-checkpoint:${orgId}`]);
      if (!rows[0]!.ok) return; // another instance is signing it
      const due = await tx.query(`SELECT 1 FROM audit_chain_state WHERE org_id = $4 AND ${Sealer.DUE}`, [force, this.every, this.intervalMs, orgId]);
      if (due.rowCount === 0) return;
      const chain = await this.loadChain(orgId);
      await this.maybeCheckpoint(chain, true);
      // This process's cached chain learns the newer checkpoint (its own would only be older).
      const cached = this.chains.get(orgId);
      if (cached && chain.lastCheckpoint && (cached.lastCheckpoint?.size ?? 0) < chain.lastCheckpoint.size && cached.sequence >= chain.lastCheckpoint.size) {
        cached.lastCheckpoint = chain.lastCheckpoint;
        cached.lastCheckpointAt = Date.now();
      }
    });
  }

  private async maybeCheckpoint(chain: Chain, force: boolean, append: Appender = this.storeAppend, q: Queryable = this.db, lastOf: LastReader = this.storeLast): Promise<void> {
    if (chain.sequence === (chain.lastCheckpoint?.size ?? 0)) return;
    if (!force && !this.checkpointDue(chain, chain.sequence)) return;
    const size = chain.sequence;
    const root = edgeRoot(chain.edge);
    // Read once: another instance's signature may replace it while we wait.
    const prev = chain.lastCheckpoint;
    if (prev) {
      const proof = await consistencyProofFromStore(q, chain.orgId, prev.size, size);
      if (!verifyConsistency(prev.size, size, prev.root, root, proof)) {
        throw new Error(`audit chain ${chain.orgId} is not consistent with its checkpoint at size ${prev.size}; refusing to sign`);
      }
    }
    const key = this.opts.signingKey;
    const note = signCheckpoint({ origin: `${this.origin}/${chain.orgId}`, size, root }, key);
    const at = this.now().toISOString();
    const data: CheckpointEventData = {
      org_id: chain.orgId,
      size,
      root_hash: root.toString('hex'),
      note,
      key_name: key.name,
      verifier_key: verifierKey(key.name, key.publicKey),
      signed_at: at,
    };
    // Checkpoints only grow: appended behind the last one read, never after a
    // larger one another instance signed meanwhile (then nothing to do here).
    const last = await lastOf(checkpointStream(chain.orgId));
    if (last && (last.data as unknown as CheckpointEventData).size >= size) return this.learnCheckpoint(chain, last);
    try {
      await append(
        checkpointStream(chain.orgId),
        [
          {
            id: derivedUuid('checkpoint', `${chain.orgId}/${size}`),
            type: CHECKPOINT_EVENT_TYPE,
            data: data as unknown as NewEvent['data'],
            metadata: { org_id: chain.orgId, actor: { kind: 'system', id: SEALER_NAME }, occurred_at: at, schema_version: 1 },
          },
        ],
        last ? last.revision : 'no_stream',
      );
    } catch (err) {
      // Already signed at this size, or another instance signed first: the next round looks again.
      if (err instanceof WrongExpectedRevision) return;
      if (!(err instanceof DuplicateEventId)) throw err;
    }
    if ((chain.lastCheckpoint?.size ?? 0) < size) {
      chain.lastCheckpoint = { size, root };
      chain.lastCheckpointAt = Date.now();
    }
    await this.saveState(q, chain);
  }

  /** A checkpoint at least as large as ours was signed elsewhere: the chain takes it when it covers it. */
  private learnCheckpoint(chain: Chain, last: RecordedEvent): void {
    const d = last.data as unknown as CheckpointEventData;
    if (d.size > chain.sequence || d.size <= (chain.lastCheckpoint?.size ?? 0)) return;
    chain.lastCheckpoint = { size: d.size, root: Buffer.from(d.root_hash, 'hex') };
    chain.lastCheckpointAt = Date.now();
  }
}

/** What the sealer keeps of an event of a chain's stream: its entry hash, the last source it seals, whether it is version 2 (a switch or a link record). */
function storedEntryOf(e: RecordedEvent): { entryHash: string; sourcePosition: Position | undefined; linked: boolean } {
  if (e.type === LINK_RECORD_TYPE) {
    const d = e.data as unknown as LinkRecordData;
    return { entryHash: d.entry_hash, sourcePosition: d.position, linked: true };
  }
  if (e.type === SWITCH_EVENT_TYPE) return { entryHash: entryHashOf(e)!, sourcePosition: undefined, linked: true };
  const entry = e.data as unknown as AuditEntry;
  return { entryHash: entry.entry_hash, sourcePosition: entry.source.position, linked: false };
}
