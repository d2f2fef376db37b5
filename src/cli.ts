import { parseArgs } from 'node:util';
import { orgStream } from '../commands/org.ts';
import { buildApp } from './app.ts';
import { verifyExport, exportChain } from './audit/export.ts';
import { verifyOrgChain } from './audit/verifier.ts';
import { loadConfig } from './config.ts';
import { listCheckpoints } from './projector/checkpoints.ts';
import { rebuildProjection } from './projector/runner.ts';
import { projections } from './readside.ts';
import { AUDIT_ORIGIN, openRuntime, type Runtime } from './runtime.ts';

// Operator and auditor commands: `npm run cli -- <command>` or `ledger <command>`.

const USAGE = `usage:
  bootstrap --org-name <name> --email <email>
  projections status
  projections rebuild [name]
  audit verify --org <org_id>
  audit export --org <org_id> --out <dir>
  audit verify-export <dir> [--key <verifier key>]
  log read [--stream <name>] [--after <position>] [--limit <n>]`;

const out = (v: unknown) => process.stdout.write(JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? x.toString() : x)) + '\n');

async function withRuntime<T>(fn: (rt: Runtime) => Promise<T>): Promise<T> {
  const rt = await openRuntime(loadConfig(), () => {}, { followers: false });
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
  const rt = await openRuntime(config);
  const app = await buildApp({ db: rt.db, store: rt.store, readSide: rt.readSide!, serviceSecret: rt.serviceSecret, vault: rt.vault, baseUrl: config.publicBaseUrl, logLevel: 'warn' });
  try {
    const platform = { authorization: `Bearer ${rt.serviceSecret}` };
    const org = await app.inject({ method: 'POST', url: '/v1/orgs', headers: platform, payload: { name: orgName, owner_email: email } });
    if (org.statusCode !== 201) {
      process.stderr.write(`creating the organization failed: ${org.statusCode} ${org.body}\n`);
      return 1;
    }
    const o = org.json() as { org: { id: string }; owner: { user_id: string }; default_project: { id: string } };
    const asOwner = { ...platform, 'x-svc-user': o.owner.user_id };
    const keys: Record<string, string> = {};
    for (const environment of ['test', 'live'] as const) {
      const k = await app.inject({ method: 'POST', url: '/v1/api-keys', headers: asOwner, payload: { name: `${environment} key`, environment } });
      if (k.statusCode !== 201) {
        process.stderr.write(`creating the ${environment} key failed: ${k.statusCode} ${k.body}\n`);
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
    });
    return 0;
  } finally {
    await app.close();
    await rt.close();
  }
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
    },
  });
  const [group, cmd, arg] = positionals;
  if (group === 'bootstrap') {
    if (!values['org-name'] || !values.email) {
      process.stderr.write(USAGE + '\n');
      return 2;
    }
    return bootstrap(values['org-name'], values.email);
  }
  switch (`${group ?? ''} ${cmd ?? ''}`) {
    case 'projections status':
      return withRuntime(async (rt) => {
        const head = await rt.store.headPosition();
        for (const c of await listCheckpoints(rt.db)) out({ ...c, head, caught_up: c.position >= head });
        return 0;
      });
    case 'projections rebuild':
      return withRuntime(async (rt) => {
        const chosen = arg ? projections.filter((p) => p.name === arg) : projections;
        if (chosen.length === 0) {
          process.stderr.write(`no projection named ${arg}; known: ${projections.map((p) => p.name).join(', ')}\n`);
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
            if (process.stderr.isTTY) process.stderr.write(`\r${p.name} ${bar(prog.processed, total, prog.processed / secs)}`);
          });
          const secs = (Date.now() - started) / 1000 || 1e-3;
          if (process.stderr.isTTY) process.stderr.write('\n');
          out({ projection: p.name, version: p.version, events: r.processed, position: r.position, seconds: secs, events_per_second: Math.round(r.processed / secs) });
        }
        return 0;
      });
    case 'audit verify':
      if (!values.org) break;
      return withRuntime(async (rt) => {
        // An organization this log never held has no chain to call verified (a typo, or the wrong DATA_DIR or DATABASE_URL).
        if ((await rt.store.readStream(orgStream(values.org!), { maxCount: 1 })).length === 0) {
          process.stderr.write(`no organization ${values.org} in this log: nothing to verify (check --org, DATA_DIR and DATABASE_URL)\n`);
          return 1;
        }
        const report = await verifyOrgChain(rt.store, values.org!, rt.auditKey, AUDIT_ORIGIN);
        out(report);
        return report.ok ? 0 : 1;
      });
    case 'audit export':
      if (!values.org || !values.out) break;
      return withRuntime(async (rt) => {
        out(await exportChain(rt.store, values.org!, AUDIT_ORIGIN, values.out!));
        return 0;
      });
    case 'audit verify-export': {
      if (!arg) break;
      const report = await verifyExport(arg, values.key);
      out(report);
      if (!report.ok) process.stderr.write(`chain broken: first bad sequence ${report.first_bad_sequence} (${report.first_problem?.kind}: ${report.first_problem?.detail})\n`);
      return report.ok ? 0 : 1;
    }
    case 'log read':
      return withRuntime(async (rt) => {
        const limit = values.limit ? Number(values.limit) : Infinity;
        let n = 0;
        if (values.stream) {
          for (const e of await rt.store.readStream(values.stream)) {
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
  process.stderr.write(USAGE + '\n');
  return 2;
}

const isMain = process.argv[1] && /cli\.ts$|ledger(\.js)?$/.test(process.argv[1]);
if (isMain) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}
