import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { auditEntries, auditTile, consistencyProof, ENTRY_PAGE_MAX, inclusionProof, latestCheckpoint, listCheckpoints, TILE_WIDTH } from '../../usecases/audit-proofs.ts';
import { defineRoute, type AppDeps } from '../kernel/route.ts';
import { Timestamp } from '../kernel/schemas.ts';

// The audit chain for auditors (spec 4.10): the signed checkpoints, inclusion
// and consistency proofs, the entries and the tiles. The chain's events,
// thresholds, health and incidents are src/http/audit/audit.ts. The logic is
// src/usecases/audit-proofs.ts.

const Cosigned = z
  .object({ size: z.number().int(), root_hash: z.string(), note: z.string(), witnesses: z.array(z.object({ name: z.string(), timestamp: z.number().int() })) })
  .meta({ id: 'AuditCosignedCheckpoint' });

/** The auditor's routes: checkpoints, proofs, entries, tiles. */
export async function auditProofRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  checkpointProofRoutes(app, deps);
  monitorRoutes(app, deps);
}

/** The signed checkpoints and the proofs against them. */
function checkpointProofRoutes(app: FastifyInstance, deps: AppDeps): void {
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
      return { status: 200, body: await listCheckpoints(deps, auth.orgId) };
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
      return { status: 200, body: await inclusionProof(deps, auth.orgId, params.sequence_number) };
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
      return { status: 200, body: await consistencyProof(deps, auth.orgId, query) };
    },
  });
}

/** What a monitor follows the log by without our database: the entries, the latest checkpoint, the tiles. */
function monitorRoutes(app: FastifyInstance, deps: AppDeps): void {
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
      return { status: 200, body: await auditEntries(deps, auth.orgId, query) };
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
      return { status: 200, body: await latestCheckpoint(deps, auth.orgId) };
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
      const body = await auditTile(deps, auth.orgId, params.level, params.index, width);
      return { status: 200, headers: { 'content-type': 'application/octet-stream', 'cache-control': width === TILE_WIDTH ? 'public, max-age=31536000, immutable' : 'no-store' }, body };
    },
  });
}
