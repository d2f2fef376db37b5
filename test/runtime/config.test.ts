import t from 'tap';
import { ConfigError, loadConfig } from '../../src/config.ts';

// Settings read from the environment by loadConfig (README "Configuration"):
// PROVIDER_OAUTH_CLIENTS and the browser worker are parsed there, and a bad
// value is a ConfigError naming the variable (one start-up line), not a crash later.

t.test('PROVIDER_OAUTH_CLIENTS: unset is none; JSON by server id; a bad value names the variable', async (t) => {
  t.same(loadConfig({}).providerOAuthClients, {});
  const clients = { contahub: { client_id: 'cid', client_secret: 'csecret' } };
  t.same(loadConfig({ PROVIDER_OAUTH_CLIENTS: JSON.stringify(clients) }).providerOAuthClients, clients);
  t.throws(() => loadConfig({ PROVIDER_OAUTH_CLIENTS: '{not json' }), new ConfigError('PROVIDER_OAUTH_CLIENTS is not JSON'));
  const bad = (() => {
    try {
      loadConfig({ PROVIDER_OAUTH_CLIENTS: JSON.stringify({ contahub: { client_id: 'cid' } }) });
    } catch (err) {
      return err;
    }
  })();
  t.ok(bad instanceof ConfigError);
  t.match((bad as Error).message, /^PROVIDER_OAUTH_CLIENTS: contahub\.client_secret/);
  t.notMatch((bad as Error).message, /cid/, 'the error does not echo the values');
});

t.test('BROWSER_WORKER / BROWSER_WORKER_URL / BROWSER_MAX_CONTEXTS / BROWSER_MAX_CONTEXTS_PER_ORG / INSTANCE_URL', async (t) => {
  const defaults = { maxContexts: 4, maxContextsPerOrg: 2, instanceUrl: undefined };
  t.same(loadConfig({}).browserWorker, { kind: 'embedded', ...defaults });
  t.same(loadConfig({ BROWSER_WORKER: 'none' }).browserWorker, { kind: 'none', ...defaults });
  t.same(loadConfig({ BROWSER_WORKER_URL: 'http://127.0.0.1:9222' }).browserWorker, { kind: 'remote', url: 'http://127.0.0.1:9222', ...defaults });
  t.throws(() => loadConfig({ BROWSER_WORKER: 'off' }), ConfigError);
  t.throws(() => loadConfig({ BROWSER_WORKER_URL: 'chromium' }), ConfigError);
  t.same(loadConfig({ BROWSER_MAX_CONTEXTS: '8', BROWSER_MAX_CONTEXTS_PER_ORG: '3', INSTANCE_URL: 'http://10.0.0.7:8080/' }).browserWorker, { kind: 'embedded', maxContexts: 8, maxContextsPerOrg: 3, instanceUrl: 'http://10.0.0.7:8080' });
  t.equal(loadConfig({ BROWSER_MAX_CONTEXTS: '2', BROWSER_MAX_CONTEXTS_PER_ORG: '5' }).browserWorker.maxContextsPerOrg, 2, 'a share is at most the whole');
  for (const bad of [{ BROWSER_MAX_CONTEXTS: '0' }, { BROWSER_MAX_CONTEXTS_PER_ORG: 'two' }, { INSTANCE_URL: 'http://10.0.0.7:8080/base' }, { INSTANCE_URL: '10.0.0.7' }]) t.throws(() => loadConfig(bad), ConfigError, JSON.stringify(bad));
});

t.test('SESSION_QUOTA_PER_ORG: 100 unset; a positive integer; anything else refused at start (it meant no quota at all)', async (t) => {
  t.equal(loadConfig({}).sessionQuota, 100);
  t.equal(loadConfig({ SESSION_QUOTA_PER_ORG: '7' }).sessionQuota, 7);
  for (const bad of ['abc', '0', '-1', '2.5']) t.throws(() => loadConfig({ SESSION_QUOTA_PER_ORG: bad }), ConfigError, bad);
});

t.test('EVENTSTORE_MAX_APPEND_BYTES: EventStoreDB\'s default MaxAppendSize unset; a positive integer up to the ceiling; anything else refused at start', async (t) => {
  t.equal(loadConfig({}).maxAppendBytes, 1_048_576);
  t.equal(loadConfig({ EVENTSTORE_MAX_APPEND_BYTES: '65536' }).maxAppendBytes, 65_536);
  for (const bad of ['abc', '0', '-1', '2.5', '65535', String(16_777_216 + 1)]) t.throws(() => loadConfig({ EVENTSTORE_MAX_APPEND_BYTES: bad }), ConfigError, bad);
});

t.test('TRUST_PROXY: unset trusts no proxy; a hop count; a list of addresses, CIDRs or loopback/linklocal/uniquelocal; anything else refused at start', async (t) => {
  t.equal(loadConfig({}).trustProxy, false);
  t.equal(loadConfig({ TRUST_PROXY: '2' }).trustProxy, 2);
  t.equal(loadConfig({ TRUST_PROXY: 'loopback, 10.0.0.0/8,2001:db8::1' }).trustProxy, 'loopback,10.0.0.0/8,2001:db8::1');
  for (const bad of ['0', '17', 'true', '10.0.0.0/33', 'proxy.example.com', '10.0.0.1/8/1']) t.throws(() => loadConfig({ TRUST_PROXY: bad }), ConfigError, bad);
});
