import { cosignatureDecider, cosignatureStream, incidentDecider, incidentStream } from '../../commands/audit.ts';
import { handleCommand } from '../eventstore/handler.ts';
import type { EventStore } from '../eventstore/port.ts';
import type { Db } from '../postgres/db.ts';
import { checkpointStream, derivedUuid } from './chain.ts';
import { type CosignerKey, formatAddCheckpoint, parseCosignerKey, splitNote, verifyCosignature } from './cosignature.ts';
import { sha256 } from './hash.ts';
import { consistencyProofFromStore } from './tree.ts';

// The service's side of C2SP tlog-witness: each organization's newest signed
// checkpoint is submitted to every witness of AUDIT_WITNESSES, off the command
// path (a loop of its own; a witness down or slow delays only its own
// cosignature), and each cosignature is recorded as an event
// (`audit.checkpoint_cosigned`), which the sealer seals like any fact.
//
// What is submitted: the first signed checkpoint that covers the organization's
// last entry other than a cosignature or an incident. Cosignatures are
// themselves sealed, so submitting the newest checkpoint would cosign the
// cosignatures forever; this target stays put once the facts stop, and every
// witness converges on the same checkpoint (k of n on one tree head).
//
// Nothing here trusts process memory for correctness: the witness's own
// record answers "old size" (409 gives its size, the protocol's catch-up), the
// cosignature stream's revision decides which record stands when several
// instances submit, and incident ids derive from the refusal.

export type WitnessEndpoint = { url: string; vkey: string; key: CosignerKey };

/** AUDIT_WITNESSES: a comma list of "<base URL> <witness verifier key>". */
export function parseWitnessList(text: string | undefined): WitnessEndpoint[] {
  if (!text || text.trim() === '') return [];
  return text.split(',').map((part) => {
    const [url, vkey, ...rest] = part.trim().split(/\s+/);
    if (!url || !vkey || rest.length > 0 || !/^https?:\/\/\S+$/.test(url)) throw new Error(`AUDIT_WITNESSES: "${part.trim()}" is not "<http(s) URL> <verifier key>"`);
    return { url: url.replace(/\/+$/, ''), vkey, key: parseCosignerKey(vkey) };
  });
}

/** Facts that do not move the submitted checkpoint (see above). */
export const UNWITNESSED_TYPES = ['audit.checkpoint_cosigned', 'audit.incident_opened'] as const;

export const witnessTag = (name: string) => sha256(name).subarray(0, 8).toString('hex');

export type WitnessStatus = { name: string; url: string; last_attempt_at: string | null; last_error: string | null };

type Target = { size: number; root_hash: string; note: string };

export class WitnessSubmitter {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  /** The witness's size as last learnt, per org and witness: a hint that saves a 409 round trip, never trusted. */
  private readonly hints = new Map<string, number>();
  /** Targets a witness refused: not resubmitted until the target moves. */
  private readonly refused = new Map<string, number>();
  readonly status = new Map<string, WitnessStatus>();

  constructor(
    private readonly db: Db,
    private readonly store: EventStore,
    private readonly witnesses: readonly WitnessEndpoint[],
    private readonly opts: { intervalMs?: number; timeoutMs?: number; now?: () => Date } = {},
  ) {
    for (const w of witnesses) this.status.set(w.key.name, { name: w.key.name, url: w.url, last_attempt_at: null, last_error: null });
  }

  private get now(): () => Date {
    return this.opts.now ?? (() => new Date());
  }

  start(): void {
    if (this.witnesses.length === 0) return;
    this.stopped = false;
    const every = Math.min(60_000, Math.max(50, this.opts.intervalMs ?? 2_000));
    const tick = () => {
      if (this.stopped) return;
      this.running = this.runOnce()
        .catch(() => {})
        .finally(() => {
          if (!this.stopped) this.timer = setTimeout(tick, every);
        });
    };
    this.timer = setTimeout(tick, every);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** One pass over every organization with a chain. */
  async runOnce(): Promise<void> {
    const { rows } = await this.db.query<{ org_id: string }>('SELECT org_id FROM audit_chain_state ORDER BY org_id');
    for (const { org_id } of rows) await this.submitOrg(org_id);
  }

  /** The checkpoint every witness of an organization should cosign, or null while none covers its facts. */
  async target(orgId: string): Promise<Target | null> {
    const last = (await this.db.query<{ s: string }>(
      'SELECT sequence_number::text AS s FROM audit_events WHERE org_id = $1 AND event_type <> ALL($2) ORDER BY sequence_number DESC LIMIT 1',
      [orgId, [...UNWITNESSED_TYPES]],
    )).rows[0];
    if (!last) return null;
    const cp = (await this.db.query<Target>('SELECT size::int, root_hash, note FROM audit_checkpoints WHERE org_id = $1 AND size >= $2 ORDER BY audit_checkpoints.size LIMIT 1', [orgId, last.s])).rows[0];
    return cp ?? null;
  }

  async submitOrg(orgId: string): Promise<void> {
    const target = await this.target(orgId);
    if (!target) return;
    await Promise.allSettled(this.witnesses.map((w) => this.submitTo(orgId, w, target)));
  }

  private async recordedSize(orgId: string, w: WitnessEndpoint): Promise<number> {
    const [last] = await this.store.readStream(cosignatureStream(orgId, witnessTag(w.key.name)), { direction: 'backwards', maxCount: 1 });
    return last ? (last.data as { size: number }).size : 0;
  }

  private async submitTo(orgId: string, w: WitnessEndpoint, target: Target): Promise<void> {
    const hintKey = `${orgId}\n${w.key.name}`;
    if (this.refused.get(hintKey) === target.size) return;
    let old = this.hints.get(hintKey) ?? (await this.recordedSize(orgId, w));
    if (old >= target.size) return;
    const st = this.status.get(w.key.name)!;
    for (let attempt = 0; attempt < 3; attempt++) {
      st.last_attempt_at = this.now().toISOString();
      const proof = old === 0 ? [] : await consistencyProofFromStore(this.db, orgId, old, target.size);
      let res: Response;
      let text: string;
      try {
        res = await fetch(`${w.url}/add-checkpoint`, { method: 'POST', body: formatAddCheckpoint(old, proof, target.note), signal: AbortSignal.timeout(this.opts.timeoutMs ?? 5_000) });
        text = await res.text();
      } catch (err) {
        st.last_error = `unreachable: ${(err as Error).message}`;
        return;
      }
      if (res.status === 200) {
        const { body } = splitNote(target.note);
        const lines = text.split('\n').filter((l) => l !== '');
        const c = verifyCosignature(body, lines, w.key);
        if (!c?.valid) {
          st.last_error = 'the answer holds no valid cosignature by the configured key';
          return;
        }
        const line = lines.find((l) => verifyCosignature(body, [l], w.key)?.valid)!;
        await handleCommand(
          this.store,
          cosignatureDecider,
          cosignatureStream(orgId, witnessTag(w.key.name)),
          { type: 'record', orgId, origin: body.slice(0, body.indexOf('\n')), size: target.size, rootHash: target.root_hash, witness: w.key.name, witnessKey: w.vkey, cosignature: line, timestamp: c.timestamp },
          { orgId, projectId: null, actor: { kind: 'system', id: 'audit-witness-client' }, requestId: null, now: this.now },
        );
        this.hints.set(hintKey, target.size);
        st.last_error = null;
        return;
      }
      if (res.status === 409 && /^\d+\n?$/.test(text)) {
        const theirs = Number(text.trim());
        this.hints.set(hintKey, theirs);
        if (theirs < target.size) {
          old = theirs;
          continue;
        }
        // At or past the target: another instance submitted. Past our newest signed checkpoint: the witness saw a tree we never signed.
        const [newest] = await this.store.readStream(checkpointStream(orgId), { direction: 'backwards', maxCount: 1 });
        const ours = newest ? (newest.data as { size: number }).size : 0;
        if (theirs > ours) await this.incident(orgId, w, target, `witness ${w.key.name} cosigned a checkpoint of size ${theirs}, beyond this log's newest signed size ${ours}`);
        st.last_error = null;
        return;
      }
      if (res.status === 422 || res.status === 409) {
        this.refused.set(hintKey, target.size);
        st.last_error = `refused (${res.status}): ${text.trim().slice(0, 200)}`;
        await this.incident(orgId, w, target, `witness ${w.key.name} refused the checkpoint of size ${target.size} (old size ${old}): ${text.trim().slice(0, 200)}`);
        return;
      }
      st.last_error = `HTTP ${res.status}: ${text.trim().slice(0, 200)}`;
      return;
    }
  }

  private async incident(orgId: string, w: WitnessEndpoint, target: Target, detail: string): Promise<void> {
    const incidentId = derivedUuid('incident', `${orgId}/witness_refused/${w.key.name}/${target.size}`);
    await handleCommand(
      this.store,
      incidentDecider,
      incidentStream(incidentId),
      { type: 'open', incidentId, orgId, kind: 'witness_refused', sequence: target.size, detail },
      { orgId, projectId: null, actor: { kind: 'system', id: 'audit-witness-client' }, requestId: null, now: this.now },
    );
  }
}
