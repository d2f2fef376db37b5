import t from 'tap';
import {
  counterpartyDecider,
  discountBps,
  identifierClaimDecider,
  identifierClaimStream,
  interactionDecider,
  normalizeIdentifier,
  sourceRefClaimDecider,
  sourceRefClaimStream,
} from '../../commands/commerce-memory.ts';
import type { DomainEvent } from '../../events/index.ts';
import { given } from '../helpers/decider.ts';

const now = '2026-11-21T12:00:00.000Z';
const earlier = '2026-11-01T12:00:00.000Z';
const tenant = { orgId: 'org_1', projectId: 'prj_1' };
const created: DomainEvent = {
  type: 'counterparty.created',
  data: { counterparty_id: 'cp_1', org_id: 'org_1', project_id: 'prj_1', kind: 'supplier', name: 'Old', identifier: '12345678000190', identifier_kind: 'cnpj', metadata: { a: 1, b: 1 }, created_at: earlier },
};
const register = { type: 'register' as const, counterpartyId: 'cp_new', tenant, kind: 'customer' as const, name: 'New', identifier: '12345678000190', identifierKind: 'cnpj' as const, metadata: { b: 2 } };

t.test('register: creates on an empty stream, merges on an existing one', async (t) => {
  given(t, counterpartyDecider, [], now)
    .when({ ...register, counterpartyId: 'cp_1' })
    .then([{ type: 'counterparty.created', data: { counterparty_id: 'cp_1', org_id: 'org_1', project_id: 'prj_1', kind: 'customer', name: 'New', identifier: '12345678000190', identifier_kind: 'cnpj', metadata: { b: 2 }, created_at: now } }]);
  given(t, counterpartyDecider, [created], now)
    .when(register)
    .then([{ type: 'counterparty.merged', data: { counterparty_id: 'cp_1', name: 'New', metadata: { a: 1, b: 2 }, at: now } }], 'name and shallow-merged metadata; kind and identifier stay');
  given(t, counterpartyDecider, [created], now).when({ ...register, tenant: { orgId: 'org_1', projectId: 'prj_2' } }).rejects('counterparty_not_found', "another project's stream is not merged into");
  given(t, counterpartyDecider, [created], now).when({ type: 'set_preferences', tenant: { orgId: 'org_2', projectId: 'prj_1' }, preferences: {} }).rejects('counterparty_not_found');
});

t.test('evolve: last_seen_at only moves forward', async (t) => {
  const s = [created, { type: 'counterparty.merged', data: { counterparty_id: 'cp_1', name: 'N', metadata: {}, at: now } } as DomainEvent, { type: 'counterparty.merged', data: { counterparty_id: 'cp_1', name: 'M', metadata: {}, at: earlier } } as DomainEvent].reduce(
    counterpartyDecider.evolve,
    counterpartyDecider.initialState(),
  );
  t.equal(s.status === 'exists' && s.c.lastSeenAt, now);
  t.equal(s.status === 'exists' && s.c.name, 'M');
});

t.test('claims: the first claim stands, later ones change nothing', async (t) => {
  const claim = { type: 'claim' as const, counterpartyId: 'cp_a', projectId: 'prj_1', identifierKind: 'email' as const, identifierHash: 'h' };
  given(t, identifierClaimDecider, [], now).when(claim).then([{ type: 'counterparty_identifier.claimed', data: { counterparty_id: 'cp_a', project_id: 'prj_1', identifier_kind: 'email', identifier_hash: 'h', at: now } }]);
  given(t, identifierClaimDecider, [{ type: 'counterparty_identifier.claimed', data: { counterparty_id: 'cp_first', project_id: 'prj_1', identifier_kind: 'email', identifier_hash: 'h', at: earlier } }], now).when(claim).then([]);
  const ref = { type: 'claim' as const, interactionId: 'ixn_b', projectId: 'prj_1', source: 'webhook' as const, sourceRefHash: 'h' };
  given(t, sourceRefClaimDecider, [{ type: 'interaction_source_ref.claimed', data: { interaction_id: 'ixn_a', project_id: 'prj_1', source: 'webhook', source_ref_hash: 'h', at: earlier } }], now).when(ref).then([]);
});

t.test('claim streams: per project, per kind or source, normalized', async (t) => {
  t.equal(normalizeIdentifier('cnpj', ' 12.345.678/0001-90 '), '12345678000190');
  t.equal(normalizeIdentifier('email', ' Ana@Example.COM'), 'ana@example.com');
  t.equal(normalizeIdentifier('phone', '+55 (11) 9876-5432'), '+551198765432');
  t.equal(normalizeIdentifier('other', ' Keep Case '), 'Keep Case');
  t.equal(identifierClaimStream('prj_1', 'email', 'a@x'), identifierClaimStream('prj_1', 'email', 'a@x'));
  t.not(identifierClaimStream('prj_1', 'email', 'a@x'), identifierClaimStream('prj_2', 'email', 'a@x'));
  t.not(identifierClaimStream('prj_1', 'email', 'a@x'), identifierClaimStream('prj_1', 'other', 'a@x'));
  t.match(identifierClaimStream('prj_1', 'email', 'a@x'), /^counterparty_identifier-prj_1\.email\.[0-9a-f]{40}$/);
  t.not(sourceRefClaimStream('prj_1', 'webhook', 'r'), sourceRefClaimStream('prj_1', 'manual', 'r'));
  t.notOk(identifierClaimStream('prj_1', 'email', 'secret@x').includes('secret'), 'the identifier itself is not in the stream name');
});

t.test('interaction: recorded once, occurred_at defaults to now', async (t) => {
  const interaction = { interaction_id: 'ixn_1', org_id: 'org_1', project_id: 'prj_1', counterparty_id: 'cp_1', counterparty_kind: 'supplier' as const, kind: 'payment' as const, occurred_at: null, source: 'manual' as const, source_ref: null, agent_id: null, amount_minor: '5', currency: 'BRL', metadata: {} };
  const recorded = { type: 'interaction.recorded', data: { ...interaction, occurred_at: now, recorded_at: now } } as DomainEvent;
  given(t, interactionDecider, [], now).when({ type: 'record', interaction }).then([recorded]);
  given(t, interactionDecider, [recorded], now).when({ type: 'record', interaction: { ...interaction, amount_minor: '6' } }).then([], 'the idempotent replay writes nothing');
});

t.test('discount in basis points, rounded down', async (t) => {
  t.equal(discountBps(10000n, 8750n), 1250n);
  t.equal(discountBps(3n, 2n), 3333n);
  t.equal(discountBps(3n, 4n), -3334n, 'a final above the list price: negative, rounded towards minus infinity');
  t.equal(discountBps(0n, 0n), null);
  t.equal(discountBps(null, 5n), null);
  t.equal(discountBps(5n, null), null);
});
