import t from 'tap';
import { hostedConnectDecider } from '../../commands/hosted-connect.ts';
import type { DomainEvent } from '../../events/index.ts';
import { given } from '../helpers/decider.ts';

// The hosted-browser connect session, pure: single use, bound to its
// organization, project and merchant, ended sessions refused.

const now = '2026-11-21T12:00:00.000Z'; // the decider helper's clock
const tenant = { orgId: 'org_1', projectId: 'prj_1' };
const data = { session_id: 'hcs_1', context_id: 'ctx_1', merchant: 'merchant-a' as const, org_id: 'org_1', project_id: 'prj_1', created_at: now };
const started: DomainEvent = { type: 'hosted_connect.started', data };
const finished: DomainEvent = { type: 'hosted_connect.finished', data: { session_id: 'hcs_1', connection_id: 'ca_1', at: now } };
const expired: DomainEvent = { type: 'hosted_connect.expired', data: { session_id: 'hcs_1', reason: 'idle', at: now } };
const finish = (over: Partial<{ orgId: string; projectId: string }> = {}, merchant: 'merchant-a' | 'merchant-b' = 'merchant-a') => ({ type: 'finish' as const, tenant: { ...tenant, ...over }, merchant, connectionId: 'ca_1' });

t.test('start and a refused start', async (t) => {
  given(t, hostedConnectDecider, []).when({ type: 'start', data }).then([started]);
  given(t, hostedConnectDecider, [started]).when({ type: 'start', data }).rejects('session_exists');
  const failure = { session_id: 'hcs_1', merchant: 'merchant-a' as const, org_id: 'org_1', project_id: 'prj_1', code: 'capacity', detail: null };
  given(t, hostedConnectDecider, []).when({ type: 'fail_start', data: failure }).then([{ type: 'hosted_connect.failed', data: { ...failure, at: now } }]);
  given(t, hostedConnectDecider, [{ type: 'hosted_connect.failed', data: { ...failure, at: now } }]).when(finish()).rejects('not_found', 'a refused start has no session');
});

t.test('finish: once, by its own tenant, at its own merchant', async (t) => {
  given(t, hostedConnectDecider, [started]).when(finish()).then([finished]);
  given(t, hostedConnectDecider, [started, finished]).when(finish()).rejects('session_used', 'single use');
  given(t, hostedConnectDecider, [started, expired]).when(finish()).rejects('session_expired');
  given(t, hostedConnectDecider, [started]).when(finish({ orgId: 'org_2' })).rejects('not_found', 'another organization');
  given(t, hostedConnectDecider, [started]).when(finish({ projectId: 'prj_2' })).rejects('not_found', 'another project');
  given(t, hostedConnectDecider, [started]).when(finish({}, 'merchant-b')).rejects('not_found', 'the other merchant');
  given(t, hostedConnectDecider, []).when(finish()).rejects('not_found');
});

t.test('expire: only an open session', async (t) => {
  given(t, hostedConnectDecider, [started]).when({ type: 'expire', reason: 'idle' }).then([expired]);
  given(t, hostedConnectDecider, [started, finished]).when({ type: 'expire', reason: 'idle' }).then([], 'a finished session stays finished');
  given(t, hostedConnectDecider, [started, expired]).when({ type: 'expire', reason: 'lifetime' }).then([], 'once');
  given(t, hostedConnectDecider, []).when({ type: 'expire', reason: 'context_lost' }).then([]);
});
