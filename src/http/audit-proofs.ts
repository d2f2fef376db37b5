import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { leafHash, verifyConsistency, verifyInclusion } from '../audit/merkle.ts';
import { consistencyProofFromStore, inclusionProofFromStore, readTile, TILE_WIDTH } from '../audit/tree.ts';
import { auditStream } from '../audit/chain.ts';
import { ApiError, forbidden } from './errors.ts';
import { defineRoute, type AppDeps } from './route.ts';
import { Timestamp, isoText as TS } from './schemas.ts';

// The audit chain for auditors (spec 4.10): the signed checkpoints, inclusion
// and consistency proofs, the entries and the tiles. The chain's events,
// thresholds, health and incidents are src/http/audit.ts.

const ENTRY_PAGE_MAX = 1000;

const Cosigned = z
  .object({ size: z.number().int(), root_hash: z.string(), note: z.string(), witnesses: z.array(z.object({ name: z.string(), timestamp: z.number().int() })) })
  .meta({ id: 'AuditCosignedCheckpoint' });

/** The newest checkpoint any witness cosigned, with every cosignature recorded for it appended to the log's note. */
async function cosignedCheckpoint(deps: AppDeps, orgId: string): Promise<z.infer<typeof Cosigned> | null> {
  const { rows } = await deps.db.query<{ size: number; root_hash: string; note: string; cosignature: string; witness: string; ts: number }>(
    `WITH c AS (SELECT (payload->>'size')::bigint AS size, payload->>'cosignature' AS cosignature, payload->>'witness' AS witness, (payload->>'timestamp')::bigint AS ts
                FROM audit_events WHERE org_id = $1 AND event_type = 'audit.checkpoint_cosigned' AND payload IS NOT NULL)
     SELECT k.size::int, k.root_hash, k.note, c.cosignature, c.witness, c.ts::float8 AS ts FROM c JOIN audit_checkpoints k ON k.org_id = $1 AND k.size = c.size
     WHERE c.size = (SELECT max(size) FROM c) ORDER BY c.witness`,
    [orgId],
  );
  if (rows.length === 0) return null;
  const first = rows[0]!;
  const lines = [...new Set(rows.map((r) => r.cosignature.replace(/\n?$/, '\n')))];
  return { size: first.size, root_hash: first.root_hash, note: first.note + lines.join(''), witnesses: rows.map((r) => ({ name: r.witness, timestamp: Number(r.ts) })) };
}

/** The auditor's routes: checkpoints, proofs, entries, tiles. */
export async function auditProofRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/audit-events/checkpoints',
    operationId: 'listAuditCheckpoints',
    summary: 'Signed checkpoints (C2SP signed notes) of the chain and the verifier keys',
    tags: ['audit'],
    auth: 'api_key',
    scope: 'audit:read',
    responses: { 200: z.object({ origin: z.string(), verifier_keys: z.array(z.string()), checkpoints: z.array(z.object({ size: z.number().int(), root_hash: z.string(), note: z.string(), signed_at: Timestamp })) }) },
    errors: [[401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth, deps }) {
      const { rows } = await deps.db.query<{ size: number; root_hash: string; note: string; signed_at: string; verifier_key: string }>(
        `SELECT size::int, root_hash, note, ${TS('signed_at')} AS signed_at, verifier_key FROM audit_checkpoints WHERE org_id = $1 ORDER BY size`,
        [auth.orgId],
      );
      return {
        status: 200,
        body: { origin: `agent-ledger/audit/${auth.orgId}`, verifier_keys: [...new Set(rows.map((r) => r.verifier_key))], checkpoints: rows.map(({ verifier_key: _v, ...r }) => r) },
      };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/audit-events/:sequence_number/proof',
    operationId: 'getAuditInclusionProof',
    summary: 'RFC 6962 inclusion proof of one entry against the latest signed checkpoint that covers it',
    tags: ['audit'],
    auth: 'api_key',
    scope: 'audit:read',
    params: z.object({ sequence_number: z.string().regex(/^[1-9]\d{0,17}$/).transform(Number) }),
    responses: {
      200: z.object({ sequence_number: z.number().int(), leaf_index: z.number().int(), entry_hash: z.string(), tree_size: z.number().int(), root_hash: z.string(), proof: z.array(z.string()), checkpoint: z.string() }),
    },
    errors: [[400, 'invalid_params'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [409, 'not_yet_checkpointed']],
    async handler({ auth, params, deps }) {
      const seq = params.sequence_number;
      const cp = (await deps.db.query<{ size: number; root_hash: string; note: string }>('SELECT size::int, root_hash, note FROM audit_checkpoints WHERE org_id = $1 ORDER BY size DESC LIMIT 1', [auth.orgId])).rows[0];
      const exists = (await deps.db.query('SELECT 1 FROM audit_events WHERE org_id = $1 AND sequence_number = $2', [auth.orgId, seq])).rowCount > 0;
      if (!exists) throw new ApiError(404, 'not_found', 'no entry with this sequence number');
      if (!cp || cp.size < seq) throw new ApiError(409, 'not_yet_checkpointed', 'no signed checkpoint covers this entry yet; retry shortly', { retriable: true });
      const entryHash = (await deps.db.query<{ entry_hash: string }>('SELECT entry_hash FROM audit_events WHERE org_id = $1 AND sequence_number = $2', [auth.orgId, seq])).rows[0]!.entry_hash;
      // O(log n) stored nodes, whatever the chain's length; checked here against the signed root before it is served.
      const proof = await inclusionProofFromStore(deps.db, auth.orgId, seq - 1, cp.size);
      if (!verifyInclusion(seq - 1, cp.size, leafHash(Buffer.from(entryHash, 'hex')), proof, Buffer.from(cp.root_hash, 'hex'))) {
        throw new ApiError(409, 'chain_unverifiable', 'the stored tree does not reproduce the signed root; see /v1/audit-events/health');
      }
      return { status: 200, body: { sequence_number: seq, leaf_index: seq - 1, entry_hash: entryHash, tree_size: cp.size, root_hash: cp.root_hash, proof: proof.map((p) => p.toString('hex')), checkpoint: cp.note } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/audit-events/checkpoints/consistency',
    operationId: 'getAuditConsistencyProof',
    summary: 'RFC 6962 consistency proof between two signed checkpoints (sizes `from` ≤ `to`): the later history extends the earlier one',
    tags: ['audit'],
    auth: 'api_key',
    scope: 'audit:read',
    query: z.object({ from: z.coerce.number().int().min(1), to: z.coerce.number().int().min(1) }).strict().refine((q) => q.from <= q.to, { message: 'from must not exceed to', path: ['from'] }),
    responses: {
      200: z.object({ from_size: z.number().int(), to_size: z.number().int(), from_root: z.string(), to_root: z.string(), proof: z.array(z.string()), from_checkpoint: z.string(), to_checkpoint: z.string() }),
    },
    errors: [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [409, 'chain_unverifiable']],
    async handler({ auth, query, deps }) {
      const { rows } = await deps.db.query<{ size: number; root_hash: string; note: string }>('SELECT size::int, root_hash, note FROM audit_checkpoints WHERE org_id = $1 AND size = ANY($2::bigint[])', [auth.orgId, [query.from, query.to]]);
      const from = rows.find((r) => r.size === query.from);
      const to = rows.find((r) => r.size === query.to);
      if (!from || !to) throw new ApiError(404, 'not_found', 'both sizes must be signed checkpoints of this chain', { from: query.from, to: query.to });
      const proof = query.from === query.to ? [] : await consistencyProofFromStore(deps.db, auth.orgId, query.from, query.to);
      if (!verifyConsistency(query.from, query.to, Buffer.from(from.root_hash, 'hex'), Buffer.from(to.root_hash, 'hex'), proof)) {
        throw new ApiError(409, 'chain_unverifiable', 'the stored tree does not prove these checkpoints consistent; see /v1/audit-events/health');
      }
      return { status: 200, body: { from_size: from.size, to_size: to.size, from_root: from.root_hash, to_root: to.root_hash, proof: proof.map((p) => p.toString('hex')), from_checkpoint: from.note, to_checkpoint: to.note } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/audit-events/entries',
    operationId: 'listAuditEntries',
    summary: 'The sealed entries in sequence order after `after_sequence` (envelope, hashes, source): what a monitor re-hashes without our database',
    tags: ['audit'],
    auth: 'api_key',
    scope: 'audit:read',
    query: z.object({ after_sequence: z.coerce.number().int().min(0).max(2 ** 53 - 1).optional(), limit: z.coerce.number().int().min(1).max(ENTRY_PAGE_MAX).optional() }).strict(),
    responses: { 200: z.object({ entries: z.array(z.record(z.string(), z.unknown())), next_after_sequence: z.number().int().nullable() }) },
    errors: [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth, query, deps }) {
      const after = query.after_sequence ?? 0;
      const limit = query.limit ?? ENTRY_PAGE_MAX;
      const page = await deps.store.readStream(auditStream(auth.orgId), { fromRevision: BigInt(after), maxCount: limit });
      const entries = page.map((e) => e.data as Record<string, unknown>);
      return { status: 200, body: { entries, next_after_sequence: page.length === limit ? after + page.length : null } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/audit-events/checkpoint',
    operationId: 'getLatestAuditCheckpoint',
    summary: 'The latest signed checkpoint and where its tiles are: what a monitor needs to follow the log without our database',
    tags: ['audit'],
    auth: 'api_key',
    scope: 'audit:read',
    responses: { 200: z.object({ origin: z.string(), size: z.number().int(), root_hash: z.string(), note: z.string(), tile_height: z.number().int(), tiles: z.string(), cosigned: Cosigned.nullable() }) },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler({ auth, deps }) {
      const cp = (await deps.db.query<{ size: number; root_hash: string; note: string }>('SELECT size::int, root_hash, note FROM audit_checkpoints WHERE org_id = $1 ORDER BY size DESC LIMIT 1', [auth.orgId])).rows[0];
      if (!cp) throw new ApiError(404, 'not_found', 'no checkpoint signed yet');
      return { status: 200, body: { origin: `agent-ledger/audit/${auth.orgId}`, size: cp.size, root_hash: cp.root_hash, note: cp.note, tile_height: 8, tiles: '/v1/audit-events/tile/{level}/{index}', cosigned: await cosignedCheckpoint(deps, auth.orgId) } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/audit-events/tile/:level/:index',
    operationId: 'getAuditTile',
    summary: 'A C2SP tlog-tiles hash tile: the 32-byte hashes of tree level 8·level from index 256·index, concatenated (partial with ?width=)',
    tags: ['audit'],
    auth: 'api_key',
    scope: 'audit:read',
    params: z.object({ level: z.coerce.number().int().min(0).max(7), index: z.coerce.number().int().min(0).max(2 ** 40) }),
    query: z.object({ width: z.coerce.number().int().min(1).max(TILE_WIDTH).optional() }).strict(),
    responses: { 200: null },
    errors: [[400, 'invalid_params'], [400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler({ auth, params, query, deps }) {
      const width = query.width ?? TILE_WIDTH;
      const hashes = await readTile(deps.db, auth.orgId, params.level, params.index, width);
      if (hashes.length < width) throw new ApiError(404, 'not_found', 'this tile does not exist at this width yet', { available: hashes.length });
      return { status: 200, headers: { 'content-type': 'application/octet-stream', 'cache-control': width === TILE_WIDTH ? 'public, max-age=31536000, immutable' : 'no-store' }, body: Buffer.concat(hashes) };
    },
  });
}
