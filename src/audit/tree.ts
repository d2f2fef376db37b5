import type { Db, Queryable } from '../postgres/db.ts';
import { EMPTY_ROOT, nodeHash } from './merkle.ts';
import { addMissingColumns, migrate } from '../postgres/schema.ts';

// The Merkle tree of each organization's chain, stored as hash nodes so that
// proofs read O(log n) rows whatever the chain's length (the layout of C2SP
// tlog-tiles: node (level, index) covers leaves [index·2^level, (index+1)·2^level);
// a tile L/N is the 256 nodes of level 8·L starting at index 256·N).
//
// Only complete (perfect) subtrees are stored; a range at the right edge is
// composed from the perfect subtrees of its binary decomposition. The right
// edge itself (one pending node per set bit of the size) is the sealer's
// constant-size state, kept beside the tip in `audit_chain_state`.

export const TILE_HEIGHT = 8;
export const TILE_WIDTH = 1 << TILE_HEIGHT;

export async function migrateTree(db: Db): Promise<void> {
  await migrate(db, async (tx) => {
    await tx.query(`CREATE TABLE IF NOT EXISTS audit_tree_nodes (
      org_id text NOT NULL,
      level smallint NOT NULL,
      idx bigint NOT NULL,
      hash bytea NOT NULL,
      PRIMARY KEY (org_id, level, idx)
    )`);
    await tx.query(`CREATE TABLE IF NOT EXISTS audit_chain_state (
      org_id text PRIMARY KEY,
      sequence bigint NOT NULL,
      tip_hash text NOT NULL,
      last_source_position text COLLATE "C" NOT NULL,
      right_edge jsonb NOT NULL,
      checkpoint_size bigint,
      checkpoint_root text,
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
    // When the last checkpoint was signed (or the chain first sealed): what makes
    // a checkpoint due by time, read by every instance's signer.
    await addMissingColumns(tx, 'audit_chain_state', [['checkpoint_at', 'timestamptz NOT NULL DEFAULT now()']]);
  });
}

export type NodeKey = readonly [level: number, index: number];
export type Node = { level: number; index: number; hash: Buffer };

/** The pending left siblings of the right edge, by level: present exactly for the set bits of the size. */
export type RightEdge = Map<number, Buffer>;

/** Appends leaves at `size`: answers the new complete nodes (leaves included) and moves the right edge in place. */
export function appendLeaves(size: number, leaves: readonly Buffer[], edge: RightEdge): Node[] {
  const out: Node[] = [];
  let n = size;
  for (const leaf of leaves) {
    out.push({ level: 0, index: n, hash: leaf });
    let carry = leaf;
    let level = 0;
    let idx = n;
    while (idx % 2 === 1) {
      carry = nodeHash(edge.get(level)!, carry);
      edge.delete(level);
      level++;
      idx = Math.floor(idx / 2);
      out.push({ level, index: idx, hash: carry });
    }
    edge.set(level, carry);
    n++;
  }
  return out;
}

/** Root of a tree from its right edge (RFC 6962 MTH of all leaves). */
export function edgeRoot(edge: RightEdge): Buffer {
  const levels = [...edge.keys()].sort((a, b) => a - b);
  if (levels.length === 0) return EMPTY_ROOT;
  let acc = edge.get(levels[0]!)!;
  for (const l of levels.slice(1)) acc = nodeHash(edge.get(l)!, acc);
  return acc;
}

export const edgeToJson = (edge: RightEdge): Record<string, string> => Object.fromEntries([...edge].map(([l, h]) => [String(l), h.toString('hex')]));
export const edgeFromJson = (j: Record<string, string>): RightEdge => new Map(Object.entries(j).map(([l, h]) => [Number(l), Buffer.from(h, 'hex')]));

/** Nodes stored per statement. */
export const NODES_PER_STATEMENT = 5000;

/** The statement storing nodes (idempotent: a node's hash never changes), with its parameters' places: org, levels, indexes, hashes. */
export const insertNodesSql = (org: string, levels: string, indexes: string, hashes: string) =>
  `INSERT INTO audit_tree_nodes (org_id, level, idx, hash)
       SELECT ${org}, l, i, h FROM unnest(${levels}::smallint[], ${indexes}::bigint[], ${hashes}::bytea[]) AS t(l, i, h)
       ON CONFLICT DO NOTHING`;

/** The parameters of insertNodesSql for some nodes, after the org. */
export const nodeParams = (nodes: readonly Node[]) => [nodes.map((n) => n.level), nodes.map((n) => n.index), nodes.map((n) => n.hash)];

/** Stores nodes. */
export async function storeNodes(q: Queryable, orgId: string, nodes: readonly Node[]): Promise<void> {
  for (let i = 0; i < nodes.length; i += NODES_PER_STATEMENT) {
    await q.query(insertNodesSql('$1', '$2', '$3', '$4'), [orgId, ...nodeParams(nodes.slice(i, i + NODES_PER_STATEMENT))]);
  }
}

const pow2 = (l: number) => 2 ** l;

/** [lo, hi) as perfect aligned subtrees, largest first (the form every RFC 6962 proof range has). */
export function pieces(lo: number, hi: number): NodeKey[] {
  const out: NodeKey[] = [];
  let a = lo;
  while (a < hi) {
    let level = 0;
    while (a % pow2(level + 1) === 0 && a + pow2(level + 1) <= hi) level++;
    out.push([level, a / pow2(level)]);
    a += pow2(level);
  }
  return out;
}

function largestPowerBelow(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** RFC 6962 PATH(m, D[0:n]) as leaf ranges, bottom-up (the order of the proof). */
export function inclusionRanges(index: number, size: number): [number, number][] {
  const path = (m: number, lo: number, hi: number): [number, number][] => {
    const n = hi - lo;
    if (n <= 1) return [];
    const k = largestPowerBelow(n);
    return m < k ? [...path(m, lo, lo + k), [lo + k, hi]] : [...path(m - k, lo + k, hi), [lo, lo + k]];
  };
  return path(index, 0, size);
}

/** RFC 6962 PROOF(m, D[0:n]) as leaf ranges. */
export function consistencyRanges(m: number, n: number): [number, number][] {
  const sub = (m: number, lo: number, hi: number, complete: boolean): [number, number][] => {
    const size = hi - lo;
    if (m === size) return complete ? [] : [[lo, hi]];
    const k = largestPowerBelow(size);
    return m <= k ? [...sub(m, lo, lo + k, complete), [lo + k, hi]] : [...sub(m - k, lo + k, hi, false), [lo, lo + k]];
  };
  if (m < 1 || m > n) return [];
  return sub(m, 0, n, true);
}

/** Reads the nodes (one query) and composes the hash of each range. */
async function rangeHashes(q: Queryable, orgId: string, ranges: readonly [number, number][]): Promise<Buffer[]> {
  const perRange = ranges.map(([lo, hi]) => pieces(lo, hi));
  const keys = new Map<string, NodeKey>();
  for (const ps of perRange) for (const k of ps) keys.set(`${k[0]}/${k[1]}`, k);
  const found = new Map<string, Buffer>();
  if (keys.size > 0) {
    const list = [...keys.values()];
    const { rows } = await q.query<{ level: number; idx: string; hash: Buffer }>(
      // One primary-key probe per node, whatever the planner's estimate of the
      // chain's size (LIMIT 1 keeps the probe from becoming a join over a scan
      // of every node of the chain, as it did for the verifier's bigger reads).
      `SELECT k.l AS level, k.i::text AS idx, n.hash FROM unnest($2::smallint[], $3::bigint[]) AS k(l, i)
       CROSS JOIN LATERAL (SELECT t.hash FROM audit_tree_nodes t WHERE t.org_id = $1 AND t.level = k.l AND t.idx = k.i LIMIT 1) n`,
      [orgId, list.map((k) => k[0]), list.map((k) => k[1])],
    );
    for (const r of rows) found.set(`${r.level}/${r.idx}`, r.hash);
  }
  return perRange.map((ps) => {
    const hashes = ps.map((k) => {
      const h = found.get(`${k[0]}/${k[1]}`);
      if (!h) throw new Error(`audit tree node ${k[0]}/${k[1]} of ${orgId} is missing`);
      return h;
    });
    let acc = hashes[hashes.length - 1]!;
    for (let i = hashes.length - 2; i >= 0; i--) acc = nodeHash(hashes[i]!, acc);
    return acc;
  });
}

export async function inclusionProofFromStore(q: Queryable, orgId: string, index: number, size: number): Promise<Buffer[]> {
  if (index < 0 || index >= size) throw new Error('index out of range');
  return rangeHashes(q, orgId, inclusionRanges(index, size));
}

export async function consistencyProofFromStore(q: Queryable, orgId: string, m: number, n: number): Promise<Buffer[]> {
  return rangeHashes(q, orgId, consistencyRanges(m, n));
}

export async function rootFromStore(q: Queryable, orgId: string, size: number): Promise<Buffer> {
  if (size === 0) return EMPTY_ROOT;
  return (await rangeHashes(q, orgId, [[0, size]]))[0]!;
}

/** Tile L/N (C2SP tlog-tiles): the stored hashes of level 8·L from index 256·N, as many as exist up to `width`. */
export async function readTile(q: Queryable, orgId: string, tileLevel: number, tileIndex: number, width = TILE_WIDTH): Promise<Buffer[]> {
  const level = tileLevel * TILE_HEIGHT;
  const start = tileIndex * TILE_WIDTH;
  const { rows } = await q.query<{ hash: Buffer }>(
    `SELECT hash FROM audit_tree_nodes WHERE org_id = $1 AND level = $2 AND idx >= $3 AND idx < $4 ORDER BY idx`,
    [orgId, level, start, start + width],
  );
  return rows.map((r) => r.hash);
}
