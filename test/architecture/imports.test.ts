import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';

// The application layer's rule (DESIGN §9b): imports only go down.
//   src/http → src/usecases → commands, projections, adapters → src/eventstore → events
// Nothing below src/http imports from it; only the composition root
// (src/app.ts) mounts it. Inside src/http, a file's place says what it may use:
//   - src/http/kernel/ is the HTTP plumbing every feature shares (defineRoute,
//     errors, auth, schemas, rate limits, …); it registers no route and
//     imports nothing of src/http outside the kernel.
//   - A route module (a file that registers routes) sits at the top of src/http,
//     or in a feature folder (src/http/<feature>/) beside the helper modules of
//     that feature alone (its wire schemas, its HTML, its request parsing).
//   - A file of src/http imports from src/http only the kernel and the helper
//     modules of its own feature folder; never a route module (what two routes
//     share is a use case), never another feature's helpers.
// The dashboard (src/dashboard) is the other surface: no surface imports the
// other (src/dashboard nothing of src/http). Its look is shared: outside
// src/dashboard and the composition root, a file imports only
// src/dashboard/look.tsx (the pages a person meets elsewhere: the OAuth
// consent page, the connect-link results, the live view, the sandbox outbox),
// and look.tsx with what it imports of src/dashboard renders only: no route.

const root = path.resolve(import.meta.dirname, '..', '..');
const COMPOSITION_ROOTS = new Set(['src/app.ts']);

function files(dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
    const rel = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...files(rel));
    else if (/\.tsx?$/.test(entry.name)) out.push(rel);
  }
  return out;
}

/** Every relative import of a file, resolved to a path from the project root. */
function importsOf(file: string): string[] {
  const text = fs.readFileSync(path.join(root, file), 'utf8');
  const out: string[] = [];
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+'(\.[^']+)'/g)) {
    out.push(path.normalize(path.join(path.dirname(file), m[1]!)));
  }
  for (const m of text.matchAll(/import\(\s*'(\.[^']+)'\s*\)/g)) out.push(path.normalize(path.join(path.dirname(file), m[1]!)));
  return out;
}

const sources = ['src', 'commands', 'projections', 'events'].flatMap(files);
const KERNEL = 'src/http/kernel/';
/** A file of src/http that registers routes itself, or mounts a plugin that does (docs.ts); kernel/route.ts, which defines defineRoute, is the framework. */
const FRAMEWORK = new Set([`${KERNEL}route.ts`]);
const ROUTES = /\bdefineRoute\(\s*app\b|\bapp\.(get|post|put|patch|delete|route|register)\(/;
const isRouteModule = (file: string) => file.startsWith('src/http/') && !FRAMEWORK.has(file) && ROUTES.test(fs.readFileSync(path.join(root, file), 'utf8'));
const routeModules = new Set(sources.filter(isRouteModule));
const http = sources.filter((f) => f.startsWith('src/http/'));
const kernel = http.filter((f) => f.startsWith(KERNEL));
/** The feature folder a file of src/http is in, or null at the top of src/http and in the kernel. */
const featureOf = (file: string) => {
  const dir = path.dirname(file);
  return dir === 'src/http' || `${dir}/`.startsWith(KERNEL) ? null : dir;
};
/** Imports of src/http files into src/http, as [importer, imported]. */
const httpImports = http.flatMap((file) => importsOf(file).filter((dep) => dep !== file && dep.startsWith('src/http/')).map((dep) => [file, dep] as const));

t.test('no route module imports another route module', async (t) => {
  const found = httpImports.filter(([, dep]) => routeModules.has(dep)).map(([file, dep]) => `${file} → ${dep}`);
  t.same(found, [], 'route-to-route imports');
});

t.test('a file of src/http imports only the kernel and its own feature folder\'s helpers', async (t) => {
  const allowed = (file: string, dep: string) =>
    dep.startsWith(KERNEL) || (featureOf(file) !== null && path.dirname(dep) === featureOf(file) && !routeModules.has(dep));
  const found = httpImports.filter(([file, dep]) => !allowed(file, dep)).map(([file, dep]) => `${file} → ${dep}`);
  t.same(found, [], 'imports across features, or of a helper outside the kernel from the top of src/http');
});

t.test('the kernel registers no route and imports nothing of src/http outside it', async (t) => {
  const found = httpImports.filter(([file, dep]) => file.startsWith(KERNEL) && !dep.startsWith(KERNEL)).map(([file, dep]) => `${file} → ${dep}`);
  t.same(found, [], 'kernel files importing src/http outside the kernel');
  t.same(kernel.filter((f) => routeModules.has(f)), [], 'route modules in the kernel');
});

t.test('nothing below src/http imports from it', async (t) => {
  const found: string[] = [];
  for (const file of sources.filter((f) => !f.startsWith('src/http/') && !COMPOSITION_ROOTS.has(f))) {
    for (const dep of importsOf(file)) if (dep.startsWith('src/http/')) found.push(`${file} → ${dep}`);
  }
  t.same(found, [], 'arrows back up into src/http');
});

const DASHBOARD = 'src/dashboard/';
const LOOK = `${DASHBOARD}look.tsx`;
/** look.tsx and every file of src/dashboard it reaches through imports. */
function lookClosure(): Set<string> {
  const seen = new Set<string>();
  const walk = (f: string) => {
    if (seen.has(f) || !f.startsWith(DASHBOARD)) return;
    seen.add(f);
    for (const dep of importsOf(f)) walk(dep);
  };
  walk(LOOK);
  return seen;
}

t.test('the dashboard imports nothing of src/http (no surface imports another)', async (t) => {
  const found = sources.filter((f) => f.startsWith(DASHBOARD)).flatMap((f) => importsOf(f).filter((d) => d.startsWith('src/http/')).map((d) => `${f} → ${d}`));
  t.same(found, [], 'dashboard files importing src/http');
});

t.test('outside the dashboard and the composition root, only the look is imported from src/dashboard', async (t) => {
  const found: string[] = [];
  for (const file of sources.filter((f) => !f.startsWith(DASHBOARD) && !COMPOSITION_ROOTS.has(f))) {
    for (const dep of importsOf(file)) if (dep.startsWith(DASHBOARD) && dep !== LOOK) found.push(`${file} → ${dep}`);
  }
  t.same(found, [], 'imports of dashboard modules other than look.tsx');
});

t.test('the look renders only: it and the dashboard files it imports register no route', async (t) => {
  const closure = lookClosure();
  t.ok(closure.has(`${DASHBOARD}layout.tsx`) && closure.has(`${DASHBOARD}assets.ts`), `the look's files are seen: ${[...closure].join(', ')}`);
  t.same([...closure].filter((f) => ROUTES.test(fs.readFileSync(path.join(root, f), 'utf8'))), [], 'route registrations reachable from look.tsx');
  t.ok(sources.some((f) => f.startsWith(DASHBOARD) && f.endsWith('.tsx') && ROUTES.test(fs.readFileSync(path.join(root, f), 'utf8'))), 'the scan sees the dashboard route modules (.tsx)');
  t.ok(sources.some((f) => !f.startsWith(DASHBOARD) && importsOf(f).includes(LOOK)), 'an import of the look from outside is seen');
});

t.test('use cases know nothing of fastify', async (t) => {
  const found = files('src/usecases').filter((f) => /from\s+'fastify'/.test(fs.readFileSync(path.join(root, f), 'utf8')));
  t.same(found, [], 'src/usecases importing fastify');
});

t.test('the rule sees what it checks', async (t) => {
  // Guards against a rule that cannot fail: the scan finds the route modules, the
  // kernel, the feature folders and the imports between them.
  t.ok(routeModules.size >= 30, `route modules found: ${routeModules.size}`);
  t.ok(importsOf('src/app.ts').some((d) => routeModules.has(d)), 'the composition root mounts route modules');
  t.ok(kernel.length >= 10, `kernel files found: ${kernel.length}`);
  t.ok(FRAMEWORK.has(`${KERNEL}route.ts`) && kernel.includes(`${KERNEL}route.ts`), 'defineRoute is in the kernel');
  const features = new Set(http.map(featureOf).filter((d) => d !== null));
  t.ok(features.size >= 3, `feature folders found: ${[...features].join(', ')}`);
  t.ok([...routeModules].some((f) => featureOf(f) !== null), 'route modules are found inside feature folders');
  t.ok(httpImports.some(([file, dep]) => featureOf(file) !== null && path.dirname(dep) === featureOf(file)), 'an import within a feature folder is seen');
  t.ok(httpImports.some(([file, dep]) => !file.startsWith(KERNEL) && dep.startsWith(KERNEL)), 'an import into the kernel is seen');
  t.ok(httpImports.some(([file, dep]) => file.startsWith(KERNEL) && dep.startsWith(KERNEL)), 'an import within the kernel is seen');
});
