import t from 'tap';
import { proxyCallDecider, sessionDecider, sessionQuotaDecider, toolCallDecider } from '../../commands/session.ts';
import type { DomainEvent } from '../../events/index.ts';
import { given } from '../helpers/decider.ts';

// The session, the organization's session quota and the tool call, pure.

const now = '2026-11-21T12:00:00.000Z';
const tenant = { orgId: 'org_1', projectId: 'prj_1' };
const created: DomainEvent = { type: 'session.created', data: { session_id: 'ses_1', org_id: 'org_1', project_id: 'prj_1', user_id: 'u1', servers: ['clima'], environment: 'test', created_at: now } };
const closed: DomainEvent = { type: 'session.closed', data: { session_id: 'ses_1', at: now } };
const claim = (id: string): DomainEvent => ({ type: 'session_quota.claimed', data: { session_id: id, limit: 2, at: now } });
const started: DomainEvent = {
  type: 'tool_call.started',
  data: { tool_call_id: 'tc_1', session_id: 'ses_1', org_id: 'org_1', project_id: 'prj_1', user_id: 'u1', server_id: 'clima', tool_name: 'get_forecast', input: {}, routing: {}, called_at: now },
};
const failed: DomainEvent = { type: 'tool_call.failed', data: { tool_call_id: 'tc_1', session_id: 'ses_1', server_id: 'clima', tool_name: 'get_forecast', error_code: 'provider_error', error_message: 'x', retriable: true, duration_ms: 3, failover_trail: [], at: now } };

t.test('session', async (t) => {
  given(t, sessionDecider, []).when({ type: 'create', data: created.data as never }).then([created]);
  given(t, sessionDecider, [created]).when({ type: 'close', tenant }).then([closed]);
  given(t, sessionDecider, [created, closed]).when({ type: 'close', tenant }).then([], 'closing twice changes nothing');
  given(t, sessionDecider, [created]).when({ type: 'close', tenant: { orgId: 'org_2', projectId: 'prj_1' } }).rejects('not_found', 'another organization');
  given(t, sessionDecider, [created]).when({ type: 'close', tenant: { orgId: 'org_1', projectId: 'prj_2' } }).rejects('not_found', 'another project');
  const deleted: DomainEvent = { type: 'session.deleted', data: { session_id: 'ses_1', reason: 'project_deleted', at: now } };
  given(t, sessionDecider, [created, closed]).when({ type: 'delete', tenant, reason: 'project_deleted' }).then([deleted], 'a closed session is deleted too');
  given(t, sessionDecider, [created, deleted]).when({ type: 'delete', tenant, reason: 'project_deleted' }).then([], 'deleting twice changes nothing');
  given(t, sessionDecider, [created, deleted]).when({ type: 'close', tenant }).rejects('not_found', 'a deleted session is gone');
  given(t, sessionDecider, []).when({ type: 'delete', tenant, reason: 'project_deleted' }).rejects('not_found', 'no such session');
  given(t, sessionDecider, [created]).when({ type: 'delete', tenant: { orgId: 'org_1', projectId: 'prj_2' }, reason: 'project_deleted' }).rejects('not_found', 'another project');
});

t.test('quota', async (t) => {
  given(t, sessionQuotaDecider, [claim('ses_1')]).when({ type: 'claim', sessionId: 'ses_2', limit: 2 }).then([claim('ses_2')]);
  given(t, sessionQuotaDecider, [claim('ses_1'), claim('ses_2')]).when({ type: 'claim', sessionId: 'ses_3', limit: 2 }).rejects('quota_exceeded');
  given(t, sessionQuotaDecider, [claim('ses_1'), claim('ses_2'), { type: 'session_quota.released', data: { session_id: 'ses_1', at: now } }]).when({ type: 'claim', sessionId: 'ses_3', limit: 2 }).then([claim('ses_3')], 'a release frees a slot');
  given(t, sessionQuotaDecider, [claim('ses_1')]).when({ type: 'release', sessionId: 'ses_9' }).then([], 'releasing an unknown session changes nothing');
});

t.test('tool call: running, then success or error, once', async (t) => {
  given(t, toolCallDecider, []).when({ type: 'start', data: started.data as never }).then([started]);
  given(t, toolCallDecider, [started]).when({ type: 'fail', data: failed.data as never }).then([failed]);
  given(t, toolCallDecider, [started, failed]).when({ type: 'fail', data: failed.data as never }).rejects('invalid_transition');
  given(t, toolCallDecider, [started]).when({ type: 'start', data: started.data as never }).rejects('concurrency_conflict');
});

t.test('proxy call: started once, then completed or failed once', async (t) => {
  const base = { proxy_call_id: 'pxc_1', session_id: 'ses_1', server_id: 'acme-payments' };
  const started: DomainEvent = { type: 'proxy_call.started', data: { ...base, org_id: 'org_1', project_id: 'prj_1', user_id: 'u1', method: 'GET', endpoint: '/v1/charges', params: {}, body: null, header_names: [], called_at: now } };
  const completed: DomainEvent = { type: 'proxy_call.completed', data: { ...base, status: 404, data: { error: 'not_found' }, duration_ms: 3, connection_id: 'conn_1', at: now } };
  given(t, proxyCallDecider, []).when({ type: 'start', data: started.data as never }).then([started]);
  given(t, proxyCallDecider, [started]).when({ type: 'start', data: started.data as never }).rejects('concurrency_conflict');
  given(t, proxyCallDecider, [started]).when({ type: 'complete', data: completed.data as never }).then([completed]);
  given(t, proxyCallDecider, [started, completed]).when({ type: 'fail', data: { ...base, error_code: 'unreachable', error_message: 'x', duration_ms: 1, at: now } }).rejects('invalid_transition');
});
