import fs from 'node:fs/promises';
import path from 'node:path';
import type { AuditEntry } from './chain.ts';
import { genesisHash } from './chain.ts';
import { type CosignerKey, countCosigners, parseCosignerKey } from './cosignature.ts';
import { CompactRange, leafHash, verifyConsistency } from './merkle.ts';
import { type Checkpoint, openCheckpoint, parseVerifierKey } from './note.ts';
import { checkEntry } from './verifier.ts';
import { type LinkedEventJson, linkedFromJson, SWITCH_EVENT_TYPE } from './link.ts';
import { checkLinked } from './verify-linked.ts';

// A monitor that follows one organization's chain from outside, through the
// public HTTP surface only: the latest checkpoint, the level-0 hash tiles, the
// verifier keys and (optionally) the sealed entries. It keeps its trusted state
// in a file: size, root, the signed checkpoint, and the compact range of the
// tree (one hash per set bit of the size), so each run fetches only the new
// leaves. A new checkpoint is accepted when its signature verifies under the
// pinned key and the tiles from the trusted size reproduce its root (which
// proves it extends the trusted tree). A rollback, a fork, a bad signature, a
// gap or an inconsistent history stops it with an evidence file that
// `verifyEvidence` (and `ledger audit verify-evidence`) check with nothing but
// the file and the log's key.

export const STATE_FORMAT = 'agent-ledger-monitor-state/v1';
export const EVIDENCE_FORMAT = 'agent-ledger-monitor-evidence/v1';
const TILE = 256;
const ENTRY_PAGE = 1000;

export type MonitorOptions = {
  baseUrl: string;
  apiKey: string;
  orgId: string;
  stateFile: string;
  /** The log's verifier key, pinned out of band; else the state file's; else the one the service publishes (trust on first use). */
  logKey?: string;
  /** Witness verifier keys of the k-of-n policy, and k. */
  witnesses?: readonly string[];
  quorum?: number;
  /** Fetch every new entry and check its canonical form, hashes and links against the tiles. */
  entries?: boolean;
  evidenceFile?: string;
  onProgress?: (done: number, total: number) => void;
  now?: () => Date;
};

export type MonitorState = {
  format: string;
  org_id: string;
  origin: string;
  log_key: string;
  size: number;
  root_hash: string;
  checkpoint: string | null;
  compact: { size: number; hash: string }[];
  /** entry_hash of the last checked entry (entries mode). */
  tip_hash: string | null;
  witnessed: { size: number; checkpoint: string; cosigners: string[] } | null;
  updated_at: string;
};

export type ProblemKind = 'bad_signature' | 'wrong_origin' | 'rollback' | 'fork' | 'inconsistent' | 'gap' | 'entry_invalid' | 'witness_split' | 'unreachable';
export type Evidence = {
  format: string;
  kind: ProblemKind;
  detail: string;
  origin: string;
  log_key: string;
  base_url: string;
  detected_at: string;
  trusted_checkpoint: string | null;
  served_checkpoint: string | null;
  /** The log's consistency proof from the trusted to the served size (hex), when one was asked for. */
  proof: string[] | null;
};

export type MonitorResult =
  | { ok: true; size: number; previous_size: number; new_entries: number; witnessed_size: number | null; quorum_met: boolean | null; cosigners: string[] }
  | { ok: false; problem: { kind: ProblemKind; detail: string }; evidence_file: string | null; size: number };

class Failure extends Error {
  constructor(
    readonly kind: ProblemKind,
    detail: string,
    readonly evidence: Partial<Pick<Evidence, 'trusted_checkpoint' | 'served_checkpoint' | 'proof'>> | null = {},
  ) {
    super(detail);
  }
}

type CheckpointResponse = { origin: string; size: number; root_hash: string; note: string; cosigned?: { size: number; root_hash: string; note: string } | null };

class Client {
  constructor(private readonly base: string, private readonly apiKey: string) {}
  async get(url: string): Promise<Response> {
    try {
      return await fetch(`${this.base}${url}`, { headers: { authorization: `Bearer ${this.apiKey}` }, signal: AbortSignal.timeout(30_000) });
    } catch (err) {
      throw new Failure('unreachable', `GET ${url}: ${(err as Error).message}`, null);
    }
  }
  async json<T>(url: string): Promise<T> {
    const r = await this.get(url);
    if (r.status !== 200) throw new Failure('unreachable', `GET ${url} answered ${r.status}: ${(await r.text()).slice(0, 200)}`, null);
    return (await r.json()) as T;
  }
}

export async function readMonitorState(file: string): Promise<MonitorState | null> {
  try {
    const s = JSON.parse(await fs.readFile(file, 'utf8')) as MonitorState;
    if (s.format !== STATE_FORMAT) throw new Error(`${file} is not a monitor state file`);
    return s;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

async function writeJson(file: string, value: unknown): Promise<void> {
  await fs.mkdir(path.dirname(path.resolve(file)), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  await fs.writeFile(tmp, JSON.stringify(value, null, 2) + '\n');
  await fs.rename(tmp, file);
}

const hex = (b: Buffer) => b.toString('hex');

/** One pass: fetch the latest checkpoint, verify it against the trusted state, advance the state. */
export async function monitorOnce(opts: MonitorOptions): Promise<MonitorResult> {
  const now = opts.now ?? (() => new Date());
  const client = new Client(opts.baseUrl.replace(/\/+$/, ''), opts.apiKey);
  const prior = await readMonitorState(opts.stateFile);
  const origin = `agent-ledger/audit/${opts.orgId}`;
  if (prior && prior.org_id !== opts.orgId) throw new Error(`${opts.stateFile} follows organization ${prior.org_id}, not ${opts.orgId}`);
  let logKey = opts.logKey ?? prior?.log_key;
  const witnesses: CosignerKey[] = (opts.witnesses ?? []).map(parseCosignerKey);
  const quorum = opts.quorum ?? witnesses.length;
  if (quorum > witnesses.length) throw new Error(`a quorum of ${quorum} needs at least that many witness keys`);
  const state: MonitorState = prior ?? { format: STATE_FORMAT, org_id: opts.orgId, origin, log_key: '', size: 0, root_hash: '', checkpoint: null, compact: [], tip_hash: null, witnessed: null, updated_at: '' };
  const evidenceFile = opts.evidenceFile ?? `${opts.stateFile}.evidence.json`;
  try {
    if (!logKey) {
      const published = await client.json<{ verifier_keys: string[] }>('/v1/audit-events/checkpoints');
      logKey = published.verifier_keys[published.verifier_keys.length - 1];
      if (!logKey) throw new Failure('unreachable', 'the service publishes no verifier key yet', null);
    }
    state.log_key = logKey;
    const key = parseVerifierKey(logKey);
    const latest = await client.json<CheckpointResponse>('/v1/audit-events/checkpoint');
    const served = open(latest.note, key, origin, state.checkpoint);
    const previous = state.size;
    const trustedRoot = state.root_hash ? Buffer.from(state.root_hash, 'hex') : null;
    if (served.size < state.size) {
      throw new Failure('rollback', `the log served a checkpoint of size ${served.size} after signing size ${state.size}`, { trusted_checkpoint: state.checkpoint, served_checkpoint: latest.note });
    }
    if (served.size === state.size && trustedRoot && !served.root.equals(trustedRoot)) {
      throw new Failure('fork', `two signed checkpoints of size ${served.size} with different roots`, { trusted_checkpoint: state.checkpoint, served_checkpoint: latest.note });
    }
    let newEntries = 0;
    if (served.size > state.size) {
      const range = CompactRange.fromJSON(state.compact);
      let tip = state.tip_hash ?? (state.size === 0 ? genesisHash(opts.orgId) : null);
      if (opts.entries && tip === null) {
        const before = await client.json<{ entries: AuditEntry[] }>(`/v1/audit-events/entries?after_sequence=${state.size - 1}&limit=1`);
        tip = before.entries[0]?.entry_hash ?? null;
        if (tip === null) throw new Failure('gap', `entry ${state.size} is missing`, { trusted_checkpoint: state.checkpoint, served_checkpoint: latest.note });
      }
      for (let from = state.size; from < served.size; ) {
        const n = Math.floor(from / TILE);
        const width = Math.min(TILE, served.size - n * TILE);
        const r = await client.get(`/v1/audit-events/tile/0/${n}${width < TILE ? `?width=${width}` : ''}`);
        const body = r.status === 200 ? Buffer.from(await r.arrayBuffer()) : Buffer.alloc(0);
        if (body.length !== width * 32) {
          throw new Failure('gap', `tile 0/${n} at width ${width} answered ${r.status} with ${body.length / 32} hashes: leaves from ${from} are missing`, { trusted_checkpoint: state.checkpoint, served_checkpoint: latest.note });
        }
        const leaves: Buffer[] = [];
        for (let i = from - n * TILE; i < width; i++) leaves.push(body.subarray(i * 32, i * 32 + 32));
        if (opts.entries) tip = await checkEntries(client, opts.orgId, from, leaves, tip!, state, latest.note);
        for (const l of leaves) range.append(l);
        from += leaves.length;
        newEntries += leaves.length;
        opts.onProgress?.(from - previous, served.size - previous);
      }
      if (!range.root().equals(served.root)) {
        let proof: Buffer[] | null = null;
        if (state.size > 0) {
          const r = await client.get(`/v1/audit-events/checkpoints/consistency?from=${state.size}&to=${served.size}`);
          if (r.status === 200) proof = ((await r.json()) as { proof: string[] }).proof.map((h) => Buffer.from(h, 'hex'));
        }
        throw new Failure('inconsistent', `the tiles from the trusted size ${state.size} do not reproduce the root of the checkpoint of size ${served.size}: it does not extend the trusted tree`, {
          trusted_checkpoint: state.checkpoint,
          served_checkpoint: latest.note,
          proof: proof?.map(hex) ?? null,
        });
      }
      state.size = served.size;
      state.root_hash = hex(served.root);
      state.checkpoint = latest.note;
      state.compact = range.toJSON();
      state.tip_hash = opts.entries ? tip : null;
    }
    // The k-of-n policy: the newest cosigned checkpoint must be one this log's tree extends to, and carry k valid cosignatures.
    let quorumMet: boolean | null = null;
    let cosigners: string[] = [];
    if (witnesses.length > 0) {
      quorumMet = false;
      const c = latest.cosigned;
      if (c) {
        const cp = open(c.note, key, origin, state.checkpoint);
        if (cp.size > state.size) throw new Failure('rollback', `witnesses cosigned size ${cp.size}, beyond the served checkpoint of size ${state.size}`, { trusted_checkpoint: c.note, served_checkpoint: latest.note });
        if (cp.size === state.size && !cp.root.equals(Buffer.from(state.root_hash, 'hex'))) {
          throw new Failure('fork', `the cosigned checkpoint of size ${cp.size} has another root than the served one`, { trusted_checkpoint: c.note, served_checkpoint: latest.note });
        }
        if (cp.size < state.size && cp.size > 0) {
          const r = await client.get(`/v1/audit-events/checkpoints/consistency?from=${cp.size}&to=${state.size}`);
          const proof = r.status === 200 ? ((await r.json()) as { proof: string[] }).proof.map((h) => Buffer.from(h, 'hex')) : null;
          if (!proof || !verifyConsistency(cp.size, state.size, cp.root, Buffer.from(state.root_hash, 'hex'), proof)) {
            throw new Failure('witness_split', `the cosigned checkpoint of size ${cp.size} is not proven consistent with the trusted one of size ${state.size}`, {
              trusted_checkpoint: state.checkpoint,
              served_checkpoint: c.note,
              proof: proof?.map(hex) ?? null,
            });
          }
        }
        cosigners = countCosigners(c.note, witnesses).valid;
        quorumMet = cosigners.length >= quorum;
        if (quorumMet && (state.witnessed?.size ?? -1) <= cp.size) state.witnessed = { size: cp.size, checkpoint: c.note, cosigners };
      }
    }
    state.updated_at = now().toISOString();
    await writeJson(opts.stateFile, state);
    return { ok: true, size: state.size, previous_size: previous, new_entries: newEntries, witnessed_size: state.witnessed?.size ?? null, quorum_met: quorumMet, cosigners };
  } catch (err) {
    if (!(err instanceof Failure)) throw err;
    let file: string | null = null;
    if (err.evidence) {
      const ev: Evidence = {
        format: EVIDENCE_FORMAT,
        kind: err.kind,
        detail: err.message,
        origin,
        log_key: logKey ?? '',
        base_url: opts.baseUrl,
        detected_at: now().toISOString(),
        trusted_checkpoint: err.evidence.trusted_checkpoint ?? null,
        served_checkpoint: err.evidence.served_checkpoint ?? null,
        proof: err.evidence.proof ?? null,
      };
      await writeJson(evidenceFile, ev);
      file = evidenceFile;
    }
    return { ok: false, problem: { kind: err.kind, detail: err.message }, evidence_file: file, size: state.size };
  }
}

function open(note: string, key: { name: string; publicKey: Uint8Array }, origin: string, trusted: string | null): Checkpoint {
  let opened;
  try {
    opened = openCheckpoint(note, key);
  } catch (err) {
    throw new Failure('bad_signature', `the checkpoint is malformed: ${(err as Error).message}`, { trusted_checkpoint: trusted, served_checkpoint: note });
  }
  if (!opened.signatureValid) throw new Failure('bad_signature', 'the checkpoint carries no valid signature by the log key', { trusted_checkpoint: trusted, served_checkpoint: note });
  if (opened.checkpoint.origin !== origin) throw new Failure('wrong_origin', `the checkpoint is for ${opened.checkpoint.origin}, not ${origin}`, { trusted_checkpoint: trusted, served_checkpoint: note });
  return opened.checkpoint;
}

/** Fetches the entries behind `leaves` (sequence from+1 onwards) and checks each: canonical envelope, hashes, link, and its leaf in the tile. */
async function checkEntries(client: Client, orgId: string, from: number, leaves: Buffer[], tip: string, state: MonitorState, served: string): Promise<string> {
  let prev = tip;
  let switched = false;
  for (let i = 0; i < leaves.length; ) {
    const page = await client.json<{ entries: (AuditEntry | { format: 2; event: LinkedEventJson })[] }>(`/v1/audit-events/entries?after_sequence=${from + i}&limit=${Math.min(ENTRY_PAGE, leaves.length - i)}`);
    if (page.entries.length === 0) throw new Failure('gap', `entry ${from + i + 1} is in the tiles but not served`, { trusted_checkpoint: state.checkpoint, served_checkpoint: served });
    for (const entry of page.entries) {
      const seq = from + i + 1;
      let problem;
      let entryHash: string;
      if ('event' in entry) {
        // Version 2: the entry is the event itself, its link in its metadata (docs/audit-chain.md, "Version 2").
        const linked = linkedFromJson(entry.event);
        const checked = checkLinked(orgId, { revision: BigInt(seq - 1), linked }, prev, linked?.type === SWITCH_EVENT_TYPE ? 0 : seq);
        problem = checked.problem;
        entryHash = checked.entryHash;
        switched = true;
      } else {
        problem = switched ? { kind: 'format_mismatch', detail: 'a version 1 entry after a version 2 one' } : checkEntry(orgId, { revision: BigInt(seq - 1), entry }, prev);
        entryHash = entry.entry_hash;
      }
      if (problem) throw new Failure(problem.kind === 'sequence_gap' || problem.kind === 'sequence_mismatch' ? 'gap' : 'entry_invalid', `entry ${seq}: ${problem.kind}: ${problem.detail}`, { trusted_checkpoint: state.checkpoint, served_checkpoint: served });
      if (!leafHash(Buffer.from(entryHash, 'hex')).equals(leaves[i]!)) throw new Failure('entry_invalid', `entry ${seq}: its entry_hash is not the tree's leaf`, { trusted_checkpoint: state.checkpoint, served_checkpoint: served });
      prev = entryHash;
      i++;
    }
  }
  return prev;
}

export type FollowOptions = MonitorOptions & { intervalMs?: number; signal?: AbortSignal; onResult?: (r: MonitorResult) => void };

/** Polls every `intervalMs` (bounded to 1 s–1 h) until a failure (answered) or the signal aborts (the last result). */
export async function monitorFollow(opts: FollowOptions): Promise<MonitorResult> {
  const every = Math.min(3_600_000, Math.max(1_000, opts.intervalMs ?? 10_000));
  let last: MonitorResult | undefined;
  for (;;) {
    last = await monitorOnce(opts);
    opts.onResult?.(last);
    if (!last.ok && last.problem.kind !== 'unreachable') return last;
    if (opts.signal?.aborted) return last;
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, every);
      opts.signal?.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
    });
    if (opts.signal?.aborted) return last;
  }
}

/**
 * Checks an evidence file with nothing but it and the log's key (pinned, or
 * the file's own): both checkpoints carry valid signatures by the key for the
 * same origin, and the claim holds: a fork is two sizes alike with roots that
 * differ; a rollback a served size below a signed one; an inconsistency a
 * proof from the log that does not verify (or none given).
 */
export function verifyEvidence(ev: Evidence, pinnedKey?: string): { proven: boolean; detail: string } {
  if (ev.format !== EVIDENCE_FORMAT) return { proven: false, detail: 'not a monitor evidence file' };
  const key = parseVerifierKey(pinnedKey ?? ev.log_key);
  const opened = (note: string | null) => {
    if (!note) return null;
    try {
      return openCheckpoint(note, key);
    } catch {
      return null;
    }
  };
  const a = opened(ev.trusted_checkpoint);
  const b = opened(ev.served_checkpoint);
  if (ev.kind === 'bad_signature') return b && !b.signatureValid ? { proven: true, detail: 'the served checkpoint carries no valid signature by the key' } : { proven: false, detail: 'the served checkpoint verifies' };
  if (!a?.signatureValid || !b?.signatureValid) return { proven: false, detail: 'a checkpoint of the evidence lacks a valid signature by the key' };
  if (a.checkpoint.origin !== b.checkpoint.origin) return { proven: false, detail: 'the checkpoints are of different logs' };
  const [x, y] = [a.checkpoint, b.checkpoint];
  switch (ev.kind) {
    case 'fork':
      return x.size === y.size && !x.root.equals(y.root) ? { proven: true, detail: `two signed roots for size ${x.size}` } : { proven: false, detail: 'the checkpoints do not fork' };
    case 'rollback':
      return y.size < x.size ? { proven: true, detail: `the log signed size ${x.size} and then served size ${y.size}` } : { proven: false, detail: 'no rollback: the served size is not smaller' };
    case 'inconsistent':
    case 'witness_split': {
      const [lo, hi] = x.size <= y.size ? [x, y] : [y, x];
      if (lo.size === hi.size) return lo.root.equals(hi.root) ? { proven: false, detail: 'the checkpoints agree' } : { proven: true, detail: `two signed roots for size ${lo.size}` };
      const proof = (ev.proof ?? []).map((h) => Buffer.from(h, 'hex'));
      if (ev.proof && verifyConsistency(lo.size, hi.size, lo.root, hi.root, proof)) return { proven: false, detail: 'the consistency proof verifies: the checkpoints are consistent' };
      return { proven: true, detail: ev.proof ? `the log's own consistency proof from ${lo.size} to ${hi.size} fails` : `the log gave no consistency proof from ${lo.size} to ${hi.size}` };
    }
    default:
      return { proven: false, detail: `${ev.kind} is reported with the checkpoints but is not provable from them alone` };
  }
}
