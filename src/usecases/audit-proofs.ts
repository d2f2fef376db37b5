import { linkedEvents, switchSequence } from '../audit/linked-range.ts';
import { isV2InChainStream, linkedToJson } from '../audit/link.ts';
import { chainItemOf, factsOfRecords } from '../audit/verifier.ts';
import { leafHash, verifyConsistency, verifyInclusion } from '../audit/merkle.ts';
import { consistencyProofFromStore, inclusionProofFromStore, readTile, TILE_WIDTH } from '../audit/tree.ts';
import { auditStream } from '../audit/chain.ts';
import { Rejection } from '../eventstore/handler.ts';
import { isoText as TS } from '../postgres/iso-text.ts';
import type { Ports } from './context.ts';

// The audit chain for auditors (spec 4.10): the signed checkpoints, inclusion
// and consistency proofs, the entries and the tiles. A proof is checked against
// the signed roots before it is served. The routes are src/http/audit/audit-proofs.ts.

export const ENTRY_PAGE_MAX = 1000;

const originOf = (orgId: string) => `agent-ledger/audit/${orgId}`;

type Checkpoint = { size: number; root_hash: string; note: string };

export type CosignedCheckpoint = { size: number; root_hash: string; note: string; witnesses: { name: string; timestamp: number }[] };

/** The newest checkpoint any witness cosigned, with every cosignature recorded for it appended to the log's note. */
async function cosignedCheckpoint(ports: Pick<Ports, 'db'>, orgId: string): Promise<CosignedCheckpoint | null> {
  const { rows } = await ports.db.query<{ size: number; root_hash: string; note: string; cosignature: string; witness: string; ts: number }>(
    `WITH c AS (SELECT size, cosignature, witness, timestamp AS ts FROM audit_cosignatures WHERE org_id = $1)
     SELECT k.size::int, k.root_hash, k.note, c.cosignature, c.witness, c.ts::float8 AS ts FROM c JOIN audit_checkpoints k ON k.org_id = $1 AND k.size = c.size
     WHERE c.size = (SELECT max(size) FROM c) ORDER BY c.witness`,
    [orgId],
  );
  if (rows.length === 0) return null;
  const first = rows[0]!;
  const lines = [...new Set(rows.map((r) => r.cosignature.replace(/\n?$/, '\n')))];
  return { size: first.size, root_hash: first.root_hash, note: first.note + lines.join(''), witnesses: rows.map((r) => ({ name: r.witness, timestamp: Number(r.ts) })) };
}

async function latest(ports: Pick<Ports, 'db'>, orgId: string): Promise<Checkpoint | undefined> {
  return (await ports.db.query<Checkpoint>('SELECT size::int, root_hash, note FROM audit_checkpoints WHERE org_id = $1 ORDER BY audit_checkpoints.size DESC LIMIT 1', [orgId])).rows[0];
}

/** Every signed checkpoint, oldest first, and the keys that signed them. */
export async function listCheckpoints(ports: Pick<Ports, 'db'>, orgId: string) {
  const { rows } = await ports.db.query<Checkpoint & { signed_at: string; verifier_key: string }>(
    `SELECT size::int, root_hash, note, ${TS('signed_at')} AS signed_at, verifier_key FROM audit_checkpoints WHERE org_id = $1 ORDER BY audit_checkpoints.size`,
    [orgId],
  );
  return { origin: originOf(orgId), verifier_keys: [...new Set(rows.map((r) => r.verifier_key))], checkpoints: rows.map(({ verifier_key: _v, ...r }) => r) };
}

/** The inclusion proof of one entry against the latest signed checkpoint (not_found, not_yet_checkpointed, chain_unverifiable). */
export async function inclusionProof(ports: Pick<Ports, 'db'>, orgId: string, seq: number) {
  const cp = await latest(ports, orgId);
  const exists = (await ports.db.query('SELECT 1 FROM audit_events WHERE org_id = $1 AND sequence_number = $2', [orgId, seq])).rowCount > 0;
  if (!exists) throw new Rejection('not_found', 'no entry with this sequence number');
  if (!cp || cp.size < seq) throw new Rejection('not_yet_checkpointed', 'no signed checkpoint covers this entry yet; retry shortly', { retriable: true });
  const entryHash = (await ports.db.query<{ entry_hash: string }>('SELECT entry_hash FROM audit_events WHERE org_id = $1 AND sequence_number = $2', [orgId, seq])).rows[0]!.entry_hash;
  // O(log n) stored nodes, whatever the chain's length; checked here against the signed root before it is served.
  const proof = await inclusionProofFromStore(ports.db, orgId, seq - 1, cp.size);
  if (!verifyInclusion(seq - 1, cp.size, leafHash(Buffer.from(entryHash, 'hex')), proof, Buffer.from(cp.root_hash, 'hex'))) {
    throw new Rejection('chain_unverifiable', 'the stored tree does not reproduce the signed root; see /v1/audit-events/health');
  }
  return { sequence_number: seq, leaf_index: seq - 1, entry_hash: entryHash, tree_size: cp.size, root_hash: cp.root_hash, proof: proof.map((p) => p.toString('hex')), checkpoint: cp.note };
}

/** The consistency proof between two signed checkpoints, from ≤ to (not_found, chain_unverifiable). */
export async function consistencyProof(ports: Pick<Ports, 'db'>, orgId: string, q: { from: number; to: number }) {
  const { rows } = await ports.db.query<Checkpoint>('SELECT size::int, root_hash, note FROM audit_checkpoints WHERE org_id = $1 AND size = ANY($2::bigint[])', [orgId, [q.from, q.to]]);
  const from = rows.find((r) => r.size === q.from);
  const to = rows.find((r) => r.size === q.to);
  if (!from || !to) throw new Rejection('not_found', 'both sizes must be signed checkpoints of this chain', { from: q.from, to: q.to });
  const proof = q.from === q.to ? [] : await consistencyProofFromStore(ports.db, orgId, q.from, q.to);
  if (!verifyConsistency(q.from, q.to, Buffer.from(from.root_hash, 'hex'), Buffer.from(to.root_hash, 'hex'), proof)) {
    throw new Rejection('chain_unverifiable', 'the stored tree does not prove these checkpoints consistent; see /v1/audit-events/health');
  }
  return { from_size: from.size, to_size: to.size, from_root: from.root_hash, to_root: to.root_hash, proof: proof.map((p) => p.toString('hex')), from_checkpoint: from.note, to_checkpoint: to.note };
}

/** The sealed entries after `after_sequence`, in sequence order; a full page names where the next starts. */
export async function auditEntries(ports: Pick<Ports, 'store' | 'db'>, orgId: string, q: { after_sequence?: number | undefined; limit?: number | undefined }) {
  const after = q.after_sequence ?? 0;
  const limit = q.limit ?? ENTRY_PAGE_MAX;
  // A switched chain: v1 entries up to the switch, then its linked events (docs/audit-chain.md, "Version 2", "For monitors").
  const switchedAt = await switchSequence(ports.store, orgId);
  const entries: Record<string, unknown>[] = [];
  if (switchedAt === 0 || after + 1 < switchedAt) {
    const page = await ports.store.readStream(auditStream(orgId), { fromRevision: BigInt(after), maxCount: switchedAt === 0 ? limit : Math.min(limit, switchedAt - 1 - after) });
    // EventStoreDB's version 2 is in the same stream: the switch, then a link record for each fact (served as the linked fact).
    const facts = factsOfRecords(ports.store);
    for (const e of page) {
      if (!isV2InChainStream(e)) {
        entries.push(e.data as Record<string, unknown>);
        continue;
      }
      const item = await chainItemOf(e, facts);
      if ('linked' in item) entries.push({ format: 2, sequence_number: Number(e.revision) + 1, event: linkedToJson(item.linked) });
    }
  }
  const from = after + entries.length + 1;
  if (switchedAt > 0 && from >= switchedAt && entries.length < limit) {
    const linked = await linkedEvents(ports.store, ports.db, orgId, from, after + limit);
    for (let seq = from; seq <= after + limit; seq++) {
      const e = linked.get(seq);
      if (!e) break;
      entries.push({ format: 2, sequence_number: seq, event: linkedToJson(e) });
    }
  }
  return { entries, next_after_sequence: entries.length === limit ? after + limit : null };
}

/** The latest signed checkpoint, where its tiles are, and the newest cosigned one (not_found before the first). */
export async function latestCheckpoint(ports: Pick<Ports, 'db'>, orgId: string) {
  const cp = await latest(ports, orgId);
  if (!cp) throw new Rejection('not_found', 'no checkpoint signed yet');
  return { origin: originOf(orgId), size: cp.size, root_hash: cp.root_hash, note: cp.note, tile_height: 8, tiles: '/v1/audit-events/tile/{level}/{index}', cosigned: await cosignedCheckpoint(ports, orgId) };
}

/** The chain's origin and the verifier key of its newest signed checkpoint (null before the first): what a person checks a proof against unless they pinned their own. */
export async function publishedVerifierKey(ports: Pick<Ports, 'db'>, orgId: string): Promise<{ origin: string; verifier_key: string | null }> {
  const { rows } = await ports.db.query<{ verifier_key: string }>('SELECT verifier_key FROM audit_checkpoints WHERE org_id = $1 ORDER BY size DESC LIMIT 1', [orgId]);
  return { origin: originOf(orgId), verifier_key: rows[0]?.verifier_key ?? null };
}

/** A hash tile's bytes at a width (not_found while the tree has fewer hashes there). */
export async function auditTile(ports: Pick<Ports, 'db'>, orgId: string, level: number, index: number, width: number): Promise<Buffer> {
  const hashes = await readTile(ports.db, orgId, level, index, width);
  if (hashes.length < width) throw new Rejection('not_found', 'this tile does not exist at this width yet', { available: hashes.length });
  return Buffer.concat(hashes);
}

export { TILE_WIDTH };
