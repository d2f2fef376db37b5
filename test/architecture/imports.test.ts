import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';

// The application layer's rule (DESIGN §9b): imports only go down.
//   src/http → src/usecases → commands, projections, adapters → src/eventstore → events
// A route module (a file of src/http that registers routes) never imports
// another route module: what two routes share is a use case. Nothing below
// src/http imports from it; only the composition root (src/app.ts) mounts it.

const root = path.resolve(import.meta.dirname, '..', '..');
const COMPOSITION_ROOTS = new Set(['src/app.ts']);

function files(dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
    const rel = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...files(rel));
    else if (entry.name.endsWith('.ts')) out.push(rel);
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
/** A file of src/http that registers routes itself (route.ts, which defines defineRoute, is the framework). */
const FRAMEWORK = new Set(['src/http/route.ts']);
const isRouteModule = (file: string) => file.startsWith('src/http/') && !FRAMEWORK.has(file) && /\bdefineRoute\(\s*app\b|\bapp\.(get|post|put|patch|delete|route)\(/.test(fs.readFileSync(path.join(root, file), 'utf8'));
const routeModules = new Set(sources.filter(isRouteModule));

t.test('no route module imports another route module', async (t) => {
  const found: string[] = [];
  for (const file of sources.filter((f) => f.startsWith('src/http/'))) {
    for (const dep of importsOf(file)) if (dep !== file && routeModules.has(dep)) found.push(`${file} → ${dep}`);
  }
  t.same(found, [], 'route-to-route imports');
});

t.test('nothing below src/http imports from it', async (t) => {
  const found: string[] = [];
  for (const file of sources.filter((f) => !f.startsWith('src/http/') && !COMPOSITION_ROOTS.has(f))) {
    for (const dep of importsOf(file)) if (dep.startsWith('src/http/')) found.push(`${file} → ${dep}`);
  }
  t.same(found, [], 'arrows back up into src/http');
});

t.test('use cases know nothing of fastify', async (t) => {
  const found = files('src/usecases').filter((f) => /from\s+'fastify'/.test(fs.readFileSync(path.join(root, f), 'utf8')));
  t.same(found, [], 'src/usecases importing fastify');
});

t.test('the rule sees what it checks', async (t) => {
  // Guards against a rule that cannot fail: the scan finds the route modules and their imports.
  t.ok(routeModules.size >= 30, `route modules found: ${routeModules.size}`);
  t.ok(importsOf('src/app.ts').some((d) => routeModules.has(d)), 'the composition root mounts route modules');
});
