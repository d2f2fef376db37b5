import type { DomainEvent, EventDataOf } from '../events/index.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';

// Deciders of monetized MCP servers: the global slug claim, the server and its
// tools, the organization's address seed, one paid call, and the platform-fee
// sweep (a lease-held lock, per-transfer intents with fixed EIP-3009 nonces,
// outcomes), so a crash mid-sweep resumes from the log and never pays twice.

export const mcpSlugStream = (slug: string) => `mcp_slug-${slug}`;
export const mcpServerStream = (id: string) => `mcp_server-${id}`;
export const mcpPaytoStream = (orgId: string) => `mcp_payto-${orgId}`;
export const mcpCallStream = (id: string) => `mcp_call-${id}`;
export const mcpSweepStream = (orgId: string) => `mcp_sweep-${orgId}`;

/** floor(price × bps / 10000), exact in integers: the remainder stays with the merchant. */
export const platformFee = (priceAtomic: bigint, bps: number): bigint => (priceAtomic * BigInt(bps)) / 10_000n;

/** A positive USDC amount with at most six decimals → atomic units (1 USDC = 10^6). */
export function priceToAtomic(price: string): bigint | null {
  const m = /^(0|[1-9]\d{0,11})(?:\.(\d{1,6}))?$/.exec(price);
  if (!m) return null;
  const atomic = BigInt(m[1]!) * 1_000_000n + BigInt((m[2] ?? '').padEnd(6, '0') || '0');
  return atomic > 0n ? atomic : null;
}
export const atomicToPrice = (a: bigint): string => `${a / 1_000_000n}.${(a % 1_000_000n).toString().padStart(6, '0')}`;

// ---- slug claim -----------------------------------------------------------

export const mcpSlugDecider: Decider<{ serverId: string | null }, { slug: string; serverId: string; orgId: string }> = {
  initialState: () => ({ serverId: null }),
  evolve: (s, e) => (e.type === 'mcp_slug.claimed' ? { serverId: e.data.server_id } : s),
  decide(c, s, { now }) {
    if (s.serverId) throw new Rejection('slug_conflict', `the slug ${c.slug} is taken`, { slug: c.slug });
    return [{ type: 'mcp_slug.claimed', data: { slug: c.slug, server_id: c.serverId, org_id: c.orgId, at: now } }];
  },
};

// ---- server ---------------------------------------------------------------

type Created = EventDataOf<'mcp_server.created'>;
export type McpServerState = null | { id: string; active: boolean; tools: Map<string, { price_atomic: string; active: boolean; description: string }> };
export type McpServerCommand =
  | { type: 'create'; data: Omit<Created, 'at'> }
  | { type: 'update'; changes: EventDataOf<'mcp_server.updated'>['changes'] }
  | { type: 'update_tool'; toolName: string; changes: EventDataOf<'mcp_tool.updated'>['changes'] };

export const mcpServerDecider: Decider<McpServerState, McpServerCommand> = {
  initialState: () => null,
  evolve(s, e) {
    if (e.type === 'mcp_server.created') return { id: e.data.server_id, active: true, tools: new Map(e.data.tools.map((t) => [t.tool_name, { price_atomic: t.price_atomic, active: t.active, description: t.description }])) };
    if (!s) return s;
    if (e.type === 'mcp_server.updated') return { ...s, active: e.data.changes.active ?? s.active };
    if (e.type === 'mcp_tool.updated') {
      const tools = new Map(s.tools);
      const t = tools.get(e.data.tool_name)!;
      tools.set(e.data.tool_name, { price_atomic: e.data.changes.price_atomic ?? t.price_atomic, active: e.data.changes.active ?? t.active, description: e.data.changes.description ?? t.description });
      return { ...s, tools };
    }
    return s;
  },
  decide(c, s, { now }): DomainEvent[] {
    if (c.type === 'create') {
      if (s) throw new Rejection('mcp_server_exists', 'the server exists');
      return [{ type: 'mcp_server.created', data: { ...c.data, at: now } }];
    }
    if (!s) throw new Rejection('not_found', 'no such MCP server');
    if (c.type === 'update') {
      const changes = Object.fromEntries(Object.entries(c.changes).filter(([, v]) => v !== undefined));
      if (Object.keys(changes).length === 0) return [];
      return [{ type: 'mcp_server.updated', data: { server_id: s.id, changes, at: now } }];
    }
    const tool = s.tools.get(c.toolName);
    if (!tool) throw new Rejection('tool_not_found', `the server has no tool ${c.toolName}`);
    const changes: EventDataOf<'mcp_tool.updated'>['changes'] = {};
    if (c.changes.active !== undefined && c.changes.active !== tool.active) changes.active = c.changes.active;
    if (c.changes.description !== undefined && c.changes.description !== tool.description) changes.description = c.changes.description;
    if (c.changes.price_atomic !== undefined && c.changes.price_atomic !== tool.price_atomic) Object.assign(changes, { price: c.changes.price, price_atomic: c.changes.price_atomic });
    if (Object.keys(changes).length === 0) return [];
    return [{ type: 'mcp_tool.updated', data: { server_id: s.id, tool_name: c.toolName, changes, at: now } }];
  },
};

// ---- the organization's address seed (first writer wins) ------------------

export const mcpPaytoDecider: Decider<{ ref: string | null }, { orgId: string; ref: string }> = {
  initialState: () => ({ ref: null }),
  evolve: (s, e) => (e.type === 'mcp_payto.seed_created' ? { ref: e.data.vault_ref } : s),
  decide: (c, s, { now }) => (s.ref ? [] : [{ type: 'mcp_payto.seed_created', data: { org_id: c.orgId, vault_ref: c.ref, at: now } }]),
};

// ---- one paid call --------------------------------------------------------

export type McpCallState = 'none' | 'settled' | 'final';
export type McpCallCommand =
  | { type: 'settled'; data: Omit<EventDataOf<'mcp_call.settled'>, 'at'> }
  | { type: 'completed'; callId: string; isError: boolean }
  | { type: 'upstream_failed'; callId: string; error: string };

export const mcpCallDecider: Decider<McpCallState, McpCallCommand> = {
  initialState: () => 'none',
  evolve: (s, e) => (e.type === 'mcp_call.settled' ? 'settled' : e.type === 'mcp_call.completed' || e.type === 'mcp_call.upstream_failed' ? 'final' : s),
  decide(c, s, { now }): DomainEvent[] {
    if (c.type === 'settled') {
      if (s !== 'none') throw new Rejection('mcp_call_exists', 'the call is recorded');
      return [{ type: 'mcp_call.settled', data: { ...c.data, at: now } }];
    }
    if (s !== 'settled') return [];
    if (c.type === 'completed') return [{ type: 'mcp_call.completed', data: { call_id: c.callId, is_error: c.isError, at: now } }];
    return [{ type: 'mcp_call.upstream_failed', data: { call_id: c.callId, error: c.error, refundable: true, at: now } }];
  },
};

// ---- the platform-fee sweep ----------------------------------------------

export type SweepTransfer = EventDataOf<'mcp_sweep.transfer_intended'> & { status: 'intended' | 'settled' | 'failed'; tx_hash: string | null };
export type SweepState = {
  open: null | { sweepId: string; holder: string; leaseUntil: string; transfers: SweepTransfer[] };
  /** Settled fees per server, over every sweep. */
  swept: Record<string, bigint>;
};
export type SweepIntent = Omit<EventDataOf<'mcp_sweep.transfer_intended'>, 'sweep_id' | 'amount_atomic' | 'at'> & { accrued_atomic: bigint };
export type SweepCommand =
  | { type: 'acquire'; sweepId: string; holder: string; leaseMs: number }
  | { type: 'intend'; holder: string; items: SweepIntent[] }
  | { type: 'outcome'; holder: string; nonce: string; outcome: { settled: true; txHash: string | null; reconciled: boolean } | { settled: false; reason: string } }
  | { type: 'release'; holder: string; reason: string }
  | { type: 'complete'; holder: string };

const holds = (s: SweepState, holder: string) => {
  if (!s.open || s.open.holder !== holder) throw new Rejection('sweep_in_progress', 'another sweep holds the lock');
  return s.open;
};

export const mcpSweepDecider: Decider<SweepState, SweepCommand> = {
  initialState: () => ({ open: null, swept: {} }),
  evolve(s, e) {
    switch (e.type) {
      case 'mcp_sweep.started':
        return { ...s, open: { sweepId: e.data.sweep_id, holder: e.data.holder, leaseUntil: e.data.lease_until, transfers: [] } };
      case 'mcp_sweep.lease_taken':
        return s.open ? { ...s, open: { ...s.open, holder: e.data.holder, leaseUntil: e.data.lease_until } } : s;
      case 'mcp_sweep.lease_released':
        return s.open ? { ...s, open: { ...s.open, holder: '', leaseUntil: e.data.at } } : s;
      case 'mcp_sweep.transfer_intended':
        return s.open ? { ...s, open: { ...s.open, transfers: [...s.open.transfers, { ...e.data, status: 'intended', tx_hash: null }] } } : s;
      case 'mcp_sweep.transfer_settled':
      case 'mcp_sweep.transfer_failed': {
        if (!s.open) return s;
        const settled = e.type === 'mcp_sweep.transfer_settled';
        const transfers = s.open.transfers.map((t): SweepTransfer => (t.nonce === e.data.nonce ? { ...t, status: settled ? 'settled' : 'failed', tx_hash: settled ? e.data.tx_hash : null } : t));
        const swept = settled ? { ...s.swept, [e.data.server_id]: (s.swept[e.data.server_id] ?? 0n) + BigInt(e.data.amount_atomic) } : s.swept;
        return { open: { ...s.open, transfers }, swept };
      }
      case 'mcp_sweep.completed':
        return { ...s, open: null };
      default:
        return s;
    }
  },
  decide(c, s, { now }): DomainEvent[] {
    if (c.type === 'acquire') {
      const leaseUntil = new Date(Date.parse(now) + c.leaseMs).toISOString();
      if (s.open && Date.parse(s.open.leaseUntil) > Date.parse(now)) throw new Rejection('sweep_in_progress', 'another sweep holds the lock', { sweep_id: s.open.sweepId });
      if (s.open) return [{ type: 'mcp_sweep.lease_taken', data: { sweep_id: s.open.sweepId, holder: c.holder, lease_until: leaseUntil, at: now } }];
      return [{ type: 'mcp_sweep.started', data: { sweep_id: c.sweepId, holder: c.holder, lease_until: leaseUntil, at: now } }];
    }
    const open = holds(s, c.holder);
    if (c.type === 'intend') {
      const out: DomainEvent[] = [];
      for (const { accrued_atomic, ...i } of c.items) {
        const pending = open.transfers.filter((t) => t.server_id === i.server_id && t.status === 'intended').reduce((a, t) => a + BigInt(t.amount_atomic), 0n);
        const amount = accrued_atomic - (s.swept[i.server_id] ?? 0n) - pending;
        if (amount > 0n) out.push({ type: 'mcp_sweep.transfer_intended', data: { ...i, sweep_id: open.sweepId, amount_atomic: amount.toString(), at: now } });
      }
      return out;
    }
    if (c.type === 'outcome') {
      const t = open.transfers.find((x) => x.nonce === c.nonce);
      if (!t || t.status !== 'intended') return [];
      const base = { sweep_id: open.sweepId, server_id: t.server_id, nonce: t.nonce, amount_atomic: t.amount_atomic, at: now };
      return c.outcome.settled
        ? [{ type: 'mcp_sweep.transfer_settled', data: { ...base, tx_hash: c.outcome.txHash, reconciled: c.outcome.reconciled } }]
        : [{ type: 'mcp_sweep.transfer_failed', data: { ...base, reason: c.outcome.reason } }];
    }
    if (c.type === 'release') return [{ type: 'mcp_sweep.lease_released', data: { sweep_id: open.sweepId, reason: c.reason, at: now } }];
    if (open.transfers.some((t) => t.status === 'intended')) throw new Rejection('sweep_incomplete', 'transfers are still open');
    const settled = open.transfers.filter((t) => t.status === 'settled');
    return [{ type: 'mcp_sweep.completed', data: { sweep_id: open.sweepId, swept: settled.length, total_atomic: settled.reduce((a, t) => a + BigInt(t.amount_atomic), 0n).toString(), at: now } }];
  },
};
