import fc from 'fast-check';
import t from 'tap';
import { atomicToPrice, mcpSlugDecider, mcpSweepDecider, platformFee, priceToAtomic, type SweepIntent } from '../../commands/mcp.ts';
import type { DomainEvent } from '../../events/index.ts';
import { given } from '../helpers/decider.ts';

// Prices, fees, the slug claim and the sweep's lock, intents and outcomes, pure.

const now = '2026-11-21T12:00:00.000Z';

t.test('prices: positive, at most six decimals, to atomic units and back', async (t) => {
  t.same(['1', '1.5', '0.000001', '0.010000', '12.345678'].map(priceToAtomic), [1_000_000n, 1_500_000n, 1n, 10_000n, 12_345_678n]);
  t.same(['0', '0.0', '0.0000001', '-1', '1.', '.5', '01', '1e3', ' 1', ''].map(priceToAtomic), Array(10).fill(null));
  t.equal(atomicToPrice(1_500_000n), '1.500000');
  fc.assert(fc.property(fc.bigInt({ min: 1n, max: 10n ** 15n }), (a) => priceToAtomic(atomicToPrice(a)) === a));
});

t.test('the fee is floor(price × bps / 10000), exact', async (t) => {
  t.equal(platformFee(12_345n, 250), 308n);
  t.equal(platformFee(10_000n, 10_000), 10_000n);
  t.equal(platformFee(9_999n, 1), 0n);
  fc.assert(
    fc.property(fc.bigInt({ min: 1n, max: 10n ** 18n }), fc.integer({ min: 0, max: 10_000 }), (p, bps) => {
      const f = platformFee(p, bps);
      return f * 10_000n <= p * BigInt(bps) && p * BigInt(bps) < (f + 1n) * 10_000n && f <= p;
    }),
  );
});

t.test('a slug is claimed once', async (t) => {
  const claimed: DomainEvent = { type: 'mcp_slug.claimed', data: { slug: 's', server_id: 'mcs_1', org_id: 'org_1', at: now } };
  given(t, mcpSlugDecider, []).when({ slug: 's', serverId: 'mcs_1', orgId: 'org_1' }).then([claimed]);
  given(t, mcpSlugDecider, [claimed]).when({ slug: 's', serverId: 'mcs_2', orgId: 'org_2' }).rejects('slug_conflict');
});

t.test('the sweep: lease, intents net of swept and in-flight fees, outcomes, completion', async (t) => {
  const started: DomainEvent = { type: 'mcp_sweep.started', data: { sweep_id: 'sweep_1', holder: 'h1', lease_until: '2026-11-21T12:02:00.000Z', at: now } };
  const item = (server: string, accrued: bigint, nonce: string): SweepIntent => ({ server_id: server, environment: 'test', network: 'base-sepolia', source: `src-${server}`, destination: 'dst', accrued_atomic: accrued, nonce, valid_after: '0', valid_before: '9' });
  const intended = (server: string, amount: string, nonce: string): DomainEvent => ({
    type: 'mcp_sweep.transfer_intended',
    data: { sweep_id: 'sweep_1', server_id: server, environment: 'test', network: 'base-sepolia', source: `src-${server}`, destination: 'dst', amount_atomic: amount, nonce, valid_after: '0', valid_before: '9', at: now },
  });
  const settled = (server: string, amount: string, nonce: string): DomainEvent => ({ type: 'mcp_sweep.transfer_settled', data: { sweep_id: 'sweep_1', server_id: server, nonce, amount_atomic: amount, tx_hash: '0xt', reconciled: false, at: now } });

  given(t, mcpSweepDecider, []).when({ type: 'acquire', sweepId: 'sweep_1', holder: 'h1', leaseMs: 120_000 }).then([started]);
  given(t, mcpSweepDecider, [started]).when({ type: 'acquire', sweepId: 'sweep_2', holder: 'h2', leaseMs: 120_000 }).rejects('sweep_in_progress', 'held while the lease runs');
  given(t, mcpSweepDecider, [started], '2026-11-21T12:02:00.001Z')
    .when({ type: 'acquire', sweepId: 'sweep_2', holder: 'h2', leaseMs: 1_000 })
    .then([{ type: 'mcp_sweep.lease_taken', data: { sweep_id: 'sweep_1', holder: 'h2', lease_until: '2026-11-21T12:02:01.001Z', at: '2026-11-21T12:02:00.001Z' } }], 'taken over after the lease');
  given(t, mcpSweepDecider, [started]).when({ type: 'intend', holder: 'h2', items: [] }).rejects('sweep_in_progress', 'only the holder acts');

  // Intents: accrued − swept − in flight; nothing when nothing is left.
  const history = [started, intended('a', '100', 'n1'), settled('a', '100', 'n1'), intended('b', '50', 'n2')];
  given(t, mcpSweepDecider, history)
    .when({ type: 'intend', holder: 'h1', items: [item('a', 130n, 'n3'), item('b', 50n, 'n4'), item('c', 0n, 'n5')] })
    .then([intended('a', '30', 'n3')]);
  given(t, mcpSweepDecider, history).when({ type: 'outcome', holder: 'h1', nonce: 'n1', outcome: { settled: true, txHash: null, reconciled: true } }).then([], 'a final transfer records no second outcome');
  given(t, mcpSweepDecider, history).when({ type: 'complete', holder: 'h1' }).rejects('sweep_incomplete');
  given(t, mcpSweepDecider, [...history, settled('b', '50', 'n2')])
    .when({ type: 'complete', holder: 'h1' })
    .then([{ type: 'mcp_sweep.completed', data: { sweep_id: 'sweep_1', swept: 2, total_atomic: '150', at: now } }]);
  // Fees swept in an earlier sweep stay swept in the next.
  const done: DomainEvent = { type: 'mcp_sweep.completed', data: { sweep_id: 'sweep_1', swept: 2, total_atomic: '150', at: now } };
  const again: DomainEvent = { type: 'mcp_sweep.started', data: { sweep_id: 'sweep_3', holder: 'h3', lease_until: '2026-11-21T12:05:00.000Z', at: now } };
  given(t, mcpSweepDecider, [...history, settled('b', '50', 'n2'), done, again])
    .when({ type: 'intend', holder: 'h3', items: [item('a', 100n, 'n6'), item('b', 60n, 'n7')] })
    .then([{ ...intended('b', '10', 'n7'), data: { ...(intended('b', '10', 'n7').data as object), sweep_id: 'sweep_3' } } as DomainEvent]);
});
