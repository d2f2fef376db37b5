// The application layer's figures at a commit (issue 41's closing note):
// route-to-route imports, imports from below back up into src/http, the five
// longest functions in src/, and the files and lines of src/http and src/usecases.
// Same rules as test/architecture/imports.test.ts, read from git, not the work tree.
//   npx tsx scripts/layer-figures.ts [commit]   (default HEAD)
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { functionSpans } from './function-spans.ts';

const commit = process.argv[2] ?? 'HEAD';
const git = (...args: string[]) => execFileSync('git', args, { encoding: 'utf8', maxBuffer: 1 << 28 });
const files = git('ls-tree', '-r', '--name-only', commit, '--', 'src', 'commands', 'projections', 'events')
  .split('\n')
  .filter((f) => f.endsWith('.ts'));
const text = new Map(files.map((f) => [f, git('show', `${commit}:${f}`)]));

function importsOf(file: string): string[] {
  const s = text.get(file)!;
  const out: string[] = [];
  for (const m of s.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+'(\.[^']+)'/g)) out.push(path.normalize(path.join(path.dirname(file), m[1]!)));
  for (const m of s.matchAll(/import\(\s*'(\.[^']+)'\s*\)/g)) out.push(path.normalize(path.join(path.dirname(file), m[1]!)));
  return out;
}
// defineRoute's own file: src/http/route.ts until the kernel folder, src/http/kernel/route.ts since.
const FRAMEWORK = new Set(['src/http/route.ts', 'src/http/kernel/route.ts']);
const isRouteModule = (f: string) => f.startsWith('src/http/') && !FRAMEWORK.has(f) && /\bdefineRoute\(\s*app\b|\bapp\.(get|post|put|patch|delete|route|register)\(/.test(text.get(f)!);
const routes = new Set(files.filter(isRouteModule));
const routeToRoute = files.filter((f) => f.startsWith('src/http/')).flatMap((f) => importsOf(f).filter((d) => d !== f && routes.has(d)).map((d) => `${f} → ${d}`));
const upward = files.filter((f) => !f.startsWith('src/http/') && f !== 'src/app.ts').flatMap((f) => importsOf(f).filter((d) => d.startsWith('src/http/')).map((d) => `${f} → ${d}`));

// Functions (declarations, methods, arrows and function expressions) by their line span.
const fns = functionSpans(new Map(files.filter((x) => x.startsWith('src/')).map((f) => [f, text.get(f)!]))).map((s) => ({ name: `${s.file}:${s.line} ${s.name ?? '(anonymous)'}`, lines: s.lines }));
fns.sort((x, y) => y.lines - x.lines);

const size = (dir: string) => {
  const fs = files.filter((f) => f.startsWith(dir));
  return `${fs.length} files, ${fs.reduce((n, f) => n + text.get(f)!.split('\n').length - 1, 0)} lines`;
};

console.log(`commit ${git('rev-parse', '--short', commit).trim()}`);
console.log(`route modules: ${routes.size}`);
console.log(`route-to-route imports: ${routeToRoute.length}`);
for (const x of routeToRoute) console.log(`  ${x}`);
console.log(`arrows back up into src/http: ${upward.length}`);
for (const x of upward) console.log(`  ${x}`);
console.log('five longest functions in src/:');
for (const x of fns.slice(0, 5)) console.log(`  ${x.lines} lines  ${x.name}`);
console.log(`src/http: ${size('src/http/')}`);
console.log(`src/usecases: ${size('src/usecases/')}`);
