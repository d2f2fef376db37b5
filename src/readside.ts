import { agentProjection } from '../projections/agent.ts';
import { auditProjection } from '../projections/audit.ts';
import { webhookProjection } from '../projections/webhook.ts';
import { bankConsentProjection } from '../projections/bank-consent.ts';
import { x402Projection } from '../projections/x402.ts';
import { mcpProjection } from '../projections/mcp.ts';
import { consumerProjection } from '../projections/consumer.ts';
import { mandateProjection } from '../projections/mandate.ts';
import { mandateSlotProjection } from '../projections/mandate-slot.ts';
import { directedConsentProjection } from '../projections/directed-consent.ts';
import { orgProjection } from '../projections/org.ts';
import { policyProjection } from '../projections/policy.ts';
import { oauthProjection } from '../projections/oauth.ts';
import { pixProjection } from '../projections/pix.ts';
import { connectionProjection } from '../projections/connection.ts';
import { signupRunProjection } from '../projections/signup-run.ts';
import { commerceMemoryProjection } from '../projections/commerce-memory.ts';
import { sessionProjection } from '../projections/session.ts';
import { policyDecisionsProjection } from '../projections/policy-decisions.ts';
import { usageProjection } from '../projections/usage.ts';
import { SEALER_NAME, Sealer, type SealerOptions } from './audit/sealer.ts';
import type { EventStore, Position } from './eventstore/port.ts';
import type { Db } from './postgres/db.ts';
import { migrateCheckpoints } from './projector/checkpoints.ts';
import { Progress } from './projector/progress.ts';
import type { Projection } from './projector/projection.ts';
import { MandateExpiryReactor } from './reactors/mandate-expiry.ts';
import { AuditVerifier } from './audit/health.ts';
import { ProjectionRunner } from './projector/runner.ts';
import { PostgresEventStore } from './eventstore/postgres.ts';
import { VerifierThread, type VerifierThreadSpec } from './audit/verifier-thread.ts';
import { inlineFollower } from './projector/inline.ts';
import { Recovery } from './recovery.ts';
import { attachSnapshots, detachSnapshots, Snapshots } from './eventstore/snapshots.ts';
import { Snapshotter, snapshotTarget } from './reactors/snapshotter.ts';
import { mandateDecider } from '../commands/mandate.ts';
import { countPass } from './metrics.ts';

// Everything that follows the log to serve reads: the projections and the
// audit sealer, and the progress tracker behind read-your-writes.

/** The deciders whose streams the snapshotter follows (each opts in with `snapshot`). */
export const snapshotted = [snapshotTarget(mandateDecider)];

export const projections: readonly Projection[] = [orgProjection, agentProjection, consumerProjection, mandateProjection, mandateSlotProjection, directedConsentProjection, auditProjection, webhookProjection, bankConsentProjection, x402Projection, policyProjection, oauthProjection, pixProjection, connectionProjection, commerceMemoryProjection, mcpProjection, sessionProjection, signupRunProjection, policyDecisionsProjection, usageProjection];

export type ReadSide = {
  progress: Progress;
  runners: ProjectionRunner[];
  sealer: Sealer;
  expiry: MandateExpiryReactor;
  /** Keeps snapshots of long streams up to date (src/eventstore/snapshots.ts). */
  snapshotter: Snapshotter;
  verifier: AuditVerifier;
  /** Heals the read side when the database goes backwards (Postgres store only: src/recovery.ts). */
  recovery: Recovery | undefined;
  /** True when every projection and the sealer have passed `position` within `timeoutMs`. */
  waitFor(position: Position, timeoutMs: number): Promise<boolean>;
  stop(): Promise<void>;
};

export async function startReadSide(
  db: Db,
  store: EventStore,
  sealerOpts: SealerOptions,
  list: readonly Projection[] = projections,
  opts: { now?: () => Date; reactors?: boolean; inline?: boolean } = {},
): Promise<ReadSide> {
  await migrateCheckpoints(db);
  const progress = new Progress(db, [...list.map((p) => p.name), SEALER_NAME]);
  const runners = list.map((p) => new ProjectionRunner(db, store, p, progress));
  const sealer = new Sealer(db, store, sealerOpts, progress);
  // The sealer reports a position only once the audit read model has its entries,
  // so a write acknowledged after waitFor is visible in GET /v1/audit-events too.
  if (list.includes(auditProjection)) sealer.afterSeal = (appended) => progress.waitForOne(auditProjection.name, appended, 30_000);
  for (const r of runners) await r.start();
  await sealer.start();
  await progress.start();
  // On the Postgres store the read side also advances inside each append
  // transaction (src/projector/inline.ts); the runners and the sealer's own
  // loop stay, to catch up whatever is behind (and alone serve EventStoreDB).
  const inlineStore = store instanceof PostgresEventStore && opts.inline !== false ? store : undefined;
  if (inlineStore) {
    const byName = new Map(runners.map((r) => [r.projection.name, r]));
    inlineStore.inline = inlineFollower(list, sealer, progress, (name) => name === SEALER_NAME || byName.get(name)?.state.status === 'running');
  }
  const recovery = store instanceof PostgresEventStore ? new Recovery(db, store, { progress, runners, sealer, projections: list }, opts.now) : undefined;
  recovery?.install();
  const expiry = new MandateExpiryReactor(db, store, opts.now ?? (() => new Date()));
  // Snapshots live in PostgreSQL beside either log; the command handler finds them through the store.
  const snapshots = await Snapshots.open(db);
  attachSnapshots(store, snapshots);
  const snapshotter = new Snapshotter(db, store, snapshots, snapshotted);
  await AuditVerifier.migrate(db);
  const verifier = new AuditVerifier(db, store, sealerOpts.signingKey, sealerOpts.origin ?? 'agent-ledger/audit', opts.now, countPass);
  let verifierThread: VerifierThread | undefined;
  if (opts.reactors !== false) {
    expiry.start();
    await snapshotter.start();
    const spec = threadSpec(db, store, sealerOpts);
    // A thread that cannot start (its store unreachable, say) leaves the verifier here.
    verifierThread = spec && !opts.now ? await VerifierThread.start(spec).catch(() => undefined) : undefined;
    if (!verifierThread) verifier.start();
  }
  return {
    progress,
    runners,
    sealer,
    expiry,
    snapshotter,
    verifier,
    recovery,
    waitFor: (position, timeoutMs) => progress.waitFor(position, timeoutMs),
    async stop() {
      await recovery?.stop();
      if (inlineStore) inlineStore.inline = undefined;
      await verifierThread?.stop();
      await verifier.stop();
      await expiry.stop();
      await snapshotter.stop();
      detachSnapshots(store, snapshots);
      await progress.stop();
      await sealer.stop();
      for (const r of runners) await r.stop();
    },
  };
}

/** How the verifier thread opens the same log and database; undefined for a store it cannot open (it then runs here). */
function threadSpec(db: Db, store: EventStore, sealerOpts: SealerOptions): VerifierThreadSpec | undefined {
  const esdb = store.kind === 'eventstoredb' && 'connectionString' in store ? (store as { connectionString(): string }).connectionString() : undefined;
  if (!(store instanceof PostgresEventStore) && !esdb) return undefined;
  return { dbUrl: db.url, esdbUrl: esdb, keyName: sealerOpts.signingKey.name, publicKey: sealerOpts.signingKey.publicKey, origin: sealerOpts.origin ?? 'agent-ledger/audit' };
}
