import fs from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { orgStream } from '../commands/org.ts';
import { verifyExport, exportChain } from './audit/export.ts';
import { verifyOrgChain } from './audit/verifier.ts';
import { loadAuditSigningKey } from './audit/keys.ts';
import { type Evidence, monitorFollow, monitorOnce, type MonitorResult, verifyEvidence } from './audit/monitor.ts';
import { parseVerifierKey } from './audit/note.ts';
import { Witness } from './audit/witness.ts';
import { loadConfig } from './config.ts';
import { listCheckpoints } from './projector/checkpoints.ts';
import type { Runtime } from './runtime.ts';
import { redactText } from './redact.ts';
import { runningServiceUrl } from './service-url.ts';
import { existingCluster, noDatabaseLine, resetDataFolder } from './postgres/data-folder.ts';
import { checkDataFolder, startupLine } from './startup.ts';
import { projectionsTable } from './cli-format.ts';

// Operator and auditor commands: `npm run cli -- <command>` or `ledger <command>`.
// The runtime and the app load lazily: a command refused for its DATA_DIR
// answers before the whole service is compiled (within a second).

/** The origin prefix of every audit chain (src/runtime.ts AUDIT_ORIGIN, repeated here so refusals need not load the runtime). */
const AUDIT_ORIGIN = 'agent-ledger/audit';
const openRuntime: typeof import('./runtime.ts').openRuntime = async (...args) => (await import('./runtime.ts')).openRuntime(...args);

const USAGE = `usage: npm run cli -- <command> (the database is the one DATA_DIR, default ./.data, or DATABASE_URL names)
  bootstrap --org-name <name> --email <email>
  reset [--yes]                     remove the data folder (DATA_DIR) and its PostgreSQL cluster; asks first unless --yes
  projections status
  projections rebuild [name]
  audit verify --org <org_id>
  audit export --org <org_id> --out <dir>
  audit verify-export <dir> [--key <verifier key>] [--witness <witness key> ... --quorum <k>]
  audit monitor --url <base URL> --org <org_id> --state <file> [--api-key <key> | LEDGER_API_KEY] [--key <log verifier key>]
                [--entries] [--witness <witness key> ... --quorum <k>] [--follow [--interval <seconds>]] [--evidence <file>]
  audit verify-evidence <file> [--key <log verifier key>]
  witness serve --key <seed file> [--name <witness name>] [--port <n>] [--host <addr>] [--state <file>] --log-key <log verifier key> ... [--origin-prefix <p>]
  log read [--stream <name>] [--after <position>] [--limit <n>]`;

/** Every line the CLI writes to stderr goes through the log redaction rule (src/redact.ts). */
const stderr = (text: string) => process.stderr.write(redactText(text));
const out = (v: unknown) => process.stdout.write(JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? x.toString() : x)) + '\n');

/** Thrown for a database the command cannot use; printed as its one line. */
class CliRefusal extends Error {}

/**
 * Opens the database for a one-shot command. A command that only reads never
 * creates a cluster: run where the service never ran, it says so in one line.
 */
async function withRuntime<T>(command: string, fn: (rt: Runtime) => Promise<T>, opts: { readOnly?: boolean } = {}): Promise<T> {
  const config = loadConfig();
  if (!config.databaseUrl && (opts.readOnly ?? true) && !existingCluster(config.dataDir)) throw new CliRefusal(noDatabaseLine(config.dataDir, command));
  const rt = await openRuntime(config, () => {}, { followers: false });
  try {
    return await fn(rt);
  } finally {
    await rt.close();
  }
}

function bar(done: number, total: number, rate: number): string {
  const width = 30;
  const frac = total > 0 ? Math.min(1, done / total) : 1;
  const filled = Math.round(frac * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${(frac * 100).toFixed(1)}% ${done} events ${rate.toFixed(0)} events/s`;
}

/** Creates an organization, its owner, and a test and a live API key, through the API itself. */
async function bootstrap(orgName: string, email: string): Promise<number> {
  const config = loadConfig();
  if (!config.databaseUrl) await checkDataFolder(config.dataDir);
  const fresh = !config.databaseUrl && !existingCluster(config.dataDir);
  // Which database this wrote to, without a password: the service must run with the same one to accept the keys.
  const database = config.databaseUrl ? `DATABASE_URL ${redactUrl(config.databaseUrl)}` : `the embedded PostgreSQL of DATA_DIR=${path.resolve(config.dataDir)}`;
  // The running service's address (its PORT and PUBLIC_BASE_URL may not be this environment's), unless told one here.
  const baseUrl = (process.env.PUBLIC_BASE_URL ? undefined : await runningServiceUrl(config.dataDir)) ?? config.publicBaseUrl;
  const rt = await openRuntime(config, () => {}, { sandboxes: false });
  const { buildApp } = await import('./app.ts');
  const app = await buildApp({ db: rt.db, store: rt.store, readSide: rt.readSide!, serviceSecret: rt.serviceSecret, vault: rt.vault, baseUrl, logLevel: 'warn' });
  try {
    const platform = { authorization: `Bearer ${rt.serviceSecret}` };
    const org = await app.inject({ method: 'POST', url: '/v1/orgs', headers: platform, payload: { name: orgName, owner_email: email } });
    if (org.statusCode !== 201) {
      stderr(`creating the organization failed: ${org.statusCode} ${org.body}\n`);
      return 1;
    }
    const o = org.json() as { org: { id: string }; owner: { user_id: string }; default_project: { id: string } };
    const asOwner = { ...platform, 'x-svc-user': o.owner.user_id };
    const keys: Record<string, string> = {};
    for (const environment of ['test', 'live'] as const) {
      const k = await app.inject({ method: 'POST', url: '/v1/api-keys', headers: asOwner, payload: { name: `${environment} key`, environment } });
      if (k.statusCode !== 201) {
        stderr(`creating the ${environment} key failed: ${k.statusCode} ${k.body}\n`);
        return 1;
      }
      keys[environment] = (k.json() as { key: string }).key;
    }
    out({
      org_id: o.org.id,
      user_id: o.owner.user_id,
      project_id: o.default_project.id,
      test_api_key: keys.test,
      live_api_key: keys.live,
      service_secret_file: rt.serviceSecretFile,
      database,
      // Where the owner signs in (with this e-mail address: a code is mailed to it).
      dashboard_url: `${baseUrl}/dashboard`,
    });
    stderr(
      `bootstrap wrote to ${database}${fresh ? ' (created now: no service had run with this DATA_DIR; start the service with the same DATA_DIR to use these keys)' : ''}\n`,
    );
    return 0;
  } finally {
    await app.close();
    await rt.close();
  }
}

/** A connection URL without its password. */
function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparsable URL)';
  }
}

/** `reset`: removes the data folder and its cluster, after a confirmation (or --yes). */
async function reset(yes: boolean): Promise<number> {
  const config = loadConfig();
  const abs = path.resolve(config.dataDir);
  if (!yes) {
    if (!process.stdin.isTTY) {
      stderr(`reset removes DATA_DIR=${abs} and its PostgreSQL cluster, with every event in it: add --yes to confirm without a terminal\n`);
      return 2;
    }
    process.stderr.write(`This removes DATA_DIR=${abs} and its PostgreSQL cluster, with every event, key and sandbox state in it. Type "yes" to go on: `);
    const answer = await new Promise<string>((resolve) => process.stdin.once('data', (d) => resolve(String(d).trim())));
    process.stdin.pause();
    if (answer !== 'yes') {
      stderr('nothing removed\n');
      return 1;
    }
  }
  const removed = await resetDataFolder(abs);
  out({ removed });
  stderr(removed.length ? `removed ${removed.join(', ')}\n` : `nothing to remove: DATA_DIR=${abs} does not exist\n`);
  return 0;
}

type MonitorFlags = { url: string; org: string; state: string; 'api-key'?: string; key?: string; entries?: boolean; witness?: string[]; quorum?: string; follow?: boolean; interval?: string; evidence?: string };

/** `audit monitor`: one pass, or --follow until a failure; exit 1 with an evidence file on a fork, rollback, bad signature or gap. */
async function monitorCommand(v: MonitorFlags): Promise<number> {
  const apiKey = v['api-key'] ?? process.env.LEDGER_API_KEY;
  if (!apiKey) {
    stderr('audit monitor needs --api-key or LEDGER_API_KEY (a key with audit:read)\n');
    return 2;
  }
  // A mistyped --org would read as log misbehaviour (checkpoints of another origin): say what the key belongs to instead.
  const who = await fetch(`${v.url.replace(/\/+$/, '')}/v1/whoami`, { headers: { authorization: `Bearer ${apiKey}` } }).then(
    async (r) => (r.ok ? ((await r.json()) as { org_id: string }) : { status: r.status }),
    (err: unknown) => ({ error: (err as Error).message }),
  );
  if ('status' in who || 'error' in who) {
    stderr(`cannot reach ${v.url} with this API key (${'status' in who ? `HTTP ${who.status}` : who.error}): check --url and --api-key\n`);
    return 2;
  }
  if (who.org_id !== v.org) {
    stderr(`unknown organization ${v.org} for this API key (it belongs to ${who.org_id}): check --org\n`);
    return 2;
  }
  const started = Date.now();
  const opts = {
    baseUrl: v.url,
    apiKey,
    orgId: v.org,
    stateFile: v.state,
    ...(v.key ? { logKey: v.key } : {}),
    ...(v.witness?.length ? { witnesses: v.witness, quorum: Number(v.quorum ?? v.witness.length) } : {}),
    ...(v.entries ? { entries: true } : {}),
    ...(v.evidence ? { evidenceFile: v.evidence } : {}),
    onProgress: (done: number, total: number) => {
      if (process.stderr.isTTY) stderr(`\r${bar(done, total, done / ((Date.now() - started) / 1000 || 1e-3))}`);
    },
  };
  const report = (r: MonitorResult) => {
    if (process.stderr.isTTY) stderr('\n');
    out(r);
    if (!r.ok) stderr(`monitor: ${r.problem.kind}: ${r.problem.detail}${r.evidence_file ? ` (evidence: ${r.evidence_file})` : ''}\n`);
  };
  if (v.follow) {
    const ac = new AbortController();
    const stop = () => ac.abort();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    const last = await monitorFollow({ ...opts, intervalMs: Number(v.interval ?? 10) * 1000, signal: ac.signal, onResult: report });
    return last.ok ? 0 : 1;
  }
  const r = await monitorOnce(opts);
  report(r);
  if (r.ok && r.quorum_met === false) {
    stderr(`monitor: the newest cosigned checkpoint lacks the quorum (${r.cosigners.length} valid cosignatures)\n`);
    return 1;
  }
  return r.ok ? 0 : 1;
}

type WitnessFlags = { key: string; name?: string; port?: string; host?: string; state?: string; 'log-key': string[]; 'origin-prefix'?: string };

/** `witness serve`: a C2SP tlog-witness on its own port until SIGINT/SIGTERM; the key's seed is generated into --key when absent. */
async function witnessServe(v: WitnessFlags): Promise<number> {
  const file = path.resolve(v.key);
  const key = await loadAuditSigningKey({ seedBase64: undefined, dataDir: path.dirname(file), fileName: path.basename(file), name: v.name ?? 'agent-ledger-witness' });
  const witness = new Witness({
    key,
    logs: v['log-key'].map((k) => ({ originPrefix: v['origin-prefix'] ?? `${AUDIT_ORIGIN}/`, key: parseVerifierKey(k) })),
    stateFile: v.state ?? `${file}.state.json`,
    log: (line) => stderr(`${new Date().toISOString()} ${line}\n`),
  });
  const url = await witness.listen(Number(v.port ?? 0), v.host ?? '127.0.0.1');
  out({ url, verifier_key: witness.verifierKey });
  // What the log's operator pastes into the service's environment (several witnesses: join with commas).
  stderr(`witness listening; give the service: AUDIT_WITNESSES="${url} ${witness.verifierKey}"\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
  await witness.close();
  return 0;
}

export async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      org: { type: 'string' },
      out: { type: 'string' },
      key: { type: 'string' },
      stream: { type: 'string' },
      after: { type: 'string' },
      limit: { type: 'string' },
      'org-name': { type: 'string' },
      email: { type: 'string' },
      url: { type: 'string' },
      state: { type: 'string' },
      'api-key': { type: 'string' },
      entries: { type: 'boolean' },
      witness: { type: 'string', multiple: true },
      quorum: { type: 'string' },
      follow: { type: 'boolean' },
      interval: { type: 'string' },
      evidence: { type: 'string' },
      name: { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string' },
      'log-key': { type: 'string', multiple: true },
      'origin-prefix': { type: 'string' },
      yes: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [group, cmd, arg] = positionals;
  if (values.help || group === 'help' || group === undefined) {
    process.stdout.write(USAGE + '\n');
    return group === undefined && !values.help ? 2 : 0;
  }
  if (group === 'reset') return reset(values.yes === true);
  if (group === 'bootstrap') {
    if (!values['org-name'] || !values.email) {
      stderr(USAGE + '\n');
      return 2;
    }
    return bootstrap(values['org-name'], values.email);
  }
  switch (`${group ?? ''} ${cmd ?? ''}`) {
    case 'projections status':
      return withRuntime('projections status', async (rt) => {
        const head = await rt.store.headPosition();
        const rows = (await listCheckpoints(rt.db)).map((c) => ({ ...c, head, caught_up: c.position >= head }));
        // A person at a terminal reads a table; a pipe gets one JSON object a line.
        if (process.stdout.isTTY) process.stdout.write(projectionsTable(rows));
        else for (const r of rows) out(r);
        return 0;
      });
    case 'projections rebuild':
      return withRuntime('projections rebuild', async (rt) => {
        const { projections } = await import('./readside.ts');
        const { rebuildProjection } = await import('./projector/runner.ts');
        const chosen = arg ? projections.filter((p) => p.name === arg) : projections;
        if (chosen.length === 0) {
          stderr(`no projection named ${arg}; known: ${projections.map((p) => p.name).join(', ')}\n`);
          return 2;
        }
        const head = await rt.store.headPosition();
        for (const p of chosen) {
          // A rebuild reads only the events its projection handles: the bar counts those.
          const { rows } = await rt.db
            .query<{ n: string }>('SELECT count(*)::text AS n FROM es_events WHERE position <= $1 AND event_type = ANY($2)', [head === '' ? '0' : head, [...p.eventTypes]])
            .catch(() => ({ rows: [{ n: '0' }] }));
          const total = Number(rows[0]?.n ?? 0);
          const started = Date.now();
          const r = await rebuildProjection(rt.db, rt.store, p, (prog) => {
            const secs = (Date.now() - started) / 1000 || 1e-3;
            if (process.stderr.isTTY) stderr(`\r${p.name} ${bar(prog.processed, total, prog.processed / secs)}`);
          });
          const secs = (Date.now() - started) / 1000 || 1e-3;
          if (process.stderr.isTTY) stderr('\n');
          out({ projection: p.name, version: p.version, events: r.processed, position: r.position, seconds: secs, events_per_second: Math.round(r.processed / secs) });
        }
        return 0;
      });
    case 'audit verify':
      if (!values.org) break;
      return withRuntime('audit verify', async (rt) => {
        // An organization this log never held has no chain to call verified (a typo, or the wrong DATA_DIR or DATABASE_URL).
        if ((await rt.store.readStream(orgStream(values.org!), { maxCount: 1 })).length === 0) {
          stderr(`no organization ${values.org} in this log: nothing to verify (check --org, DATA_DIR and DATABASE_URL)\n`);
          return 1;
        }
        const started = Date.now();
        const progress = process.stderr.isTTY ? (n: number) => n % 500 === 0 && stderr(`\rverifying ${values.org}: ${n} entries, ${Math.round(n / ((Date.now() - started) / 1000 || 1e-3))} entries/s`) : undefined;
        // A second thread reads and hashes half the linked tail (PostgreSQL log): an auditor's walk uses both cores.
        const report = await verifyOrgChain(rt.store, values.org!, rt.auditKey, AUDIT_ORIGIN, progress, { helper: { dbUrl: rt.db.url } });
        if (progress) stderr('\r\x1b[K');
        out(report);
        return report.ok ? 0 : 1;
      });
    case 'audit export':
      if (!values.org || !values.out) break;
      return withRuntime('audit export', async (rt) => {
        out(await exportChain(rt.store, values.org!, AUDIT_ORIGIN, values.out!));
        return 0;
      });
    case 'audit verify-export': {
      if (!arg) break;
      const policy = values.witness?.length ? { witnesses: values.witness, quorum: Number(values.quorum ?? values.witness.length) } : undefined;
      const report = await verifyExport(arg, values.key, policy);
      out(report);
      if (!report.ok) stderr(`chain broken: first bad sequence ${report.first_bad_sequence} (${report.first_problem?.kind}: ${report.first_problem?.detail})\n`);
      return report.ok ? 0 : 1;
    }
    case 'audit monitor':
      if (!values.url || !values.org || !values.state) break;
      return monitorCommand(values as MonitorFlags);
    case 'audit verify-evidence': {
      if (!arg) break;
      const r = verifyEvidence(JSON.parse(await fs.readFile(arg, 'utf8')) as Evidence, values.key);
      out(r);
      return r.proven ? 0 : 1;
    }
    case 'witness serve':
      if (!values.key || !values['log-key']?.length) break;
      return witnessServe(values as WitnessFlags);
    case 'log read':
      return withRuntime('log read', async (rt) => {
        const limit = values.limit ? Number(values.limit) : Infinity;
        let n = 0;
        if (values.stream) {
          const events = await rt.store.readStream(values.stream);
          if (events.length === 0) {
            stderr(`no stream ${values.stream} in this log (streams are named like org-<id>, mandate-<id>, audit-<org id>): check --stream, DATA_DIR and DATABASE_URL\n`);
            return 1;
          }
          for (const e of events) {
            if (n++ >= limit) break;
            out(e);
          }
          return 0;
        }
        let after = values.after ?? '';
        for (;;) {
          const page = await rt.store.readAll({ after, maxCount: 1000 });
          for (const e of page) {
            if (n++ >= limit) return 0;
            out(e);
          }
          if (page.length < 1000) return 0;
          after = page[page.length - 1]!.position;
        }
      });
  }
  stderr(USAGE + '\n');
  return 2;
}

const isMain = process.argv[1] && /cli\.[jt]s$|ledger(\.js)?$/.test(process.argv[1]);
if (isMain) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      // A database or folder that cannot work is one line naming it, never a stack trace.
      stderr(err instanceof CliRefusal ? `${err.message}\n` : `error: ${startupLine(err).replace(/^could not start: /, '')}\n`);
      process.exit(1);
    },
  );
}
