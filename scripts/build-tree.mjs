// `npm test` runs the suite on compiled JavaScript. `tsc -p tsconfig.build.json`
// (the typecheck) emits every .ts/.tsx file as .js into .build/, with the same
// layout and its relative imports rewritten to .js; this script completes the
// tree so that code finding files next to itself (assets, JSON, fixtures, the
// TypeScript entry points a test starts through tsx) finds them there too:
//   - every other file of the code folders is linked into .build/;
//   - every other top-level entry (docs, contracts, bin, node_modules, .tap…)
//     is linked, except package.json, written with tap's configuration for
//     .js test files and no tsx loader;
//   - what an earlier build left and the sources no longer have is removed
//     (a deleted test must not keep running from its stale .js).
// Loading the compiled tree costs a third of what tsx's loader costs per
// process (docs/performance.md, "The suite"). `npx tap test/x.test.ts` and
// `npm start` still run the TypeScript through tsx.
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const out = path.join(root, '.build');
const CODE = ['src', 'events', 'commands', 'projections', 'test', 'bench', 'tools', 'scripts'];
const SKIP = new Set(['.build', '.git', 'package.json', ...CODE]);
const compiled = /\.tsx?$/;

function link(target, at) {
  const current = fs.lstatSync(at, { throwIfNoEntry: false });
  if (current?.isSymbolicLink() && fs.readlinkSync(at) === target) return;
  if (current) fs.rmSync(at, { recursive: true, force: true });
  fs.symlinkSync(target, at);
}

fs.mkdirSync(out, { recursive: true });
for (const entry of fs.readdirSync(root)) if (!SKIP.has(entry)) link(path.join(root, entry), path.join(out, entry));

/** Links the folder's non-TypeScript files (and the .ts sources themselves, for tsx), prunes what its source lost. */
function mirror(rel) {
  const src = path.join(root, rel);
  const dst = path.join(out, rel);
  fs.mkdirSync(dst, { recursive: true });
  const here = new Set();
  for (const e of fs.readdirSync(src, { withFileTypes: true })) {
    here.add(e.name);
    if (e.isDirectory()) mirror(path.join(rel, e.name));
    else if (compiled.test(e.name)) {
      here.add(e.name.replace(compiled, '.js'));
      link(path.join(src, e.name), path.join(dst, e.name));
    } else if (!(e.name.endsWith('.json') && fs.lstatSync(path.join(dst, e.name), { throwIfNoEntry: false })?.isFile())) {
      // A JSON file a module imports is emitted by tsc; every other file is the source's own.
      link(path.join(src, e.name), path.join(dst, e.name));
    }
  }
  for (const name of fs.readdirSync(dst)) if (!here.has(name)) fs.rmSync(path.join(dst, name), { recursive: true, force: true });
}
for (const dir of CODE) if (fs.existsSync(path.join(root, dir))) mirror(dir);

const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
pkg.tap = { ...pkg.tap, 'node-arg': (pkg.tap['node-arg'] ?? []).filter((a) => !/tsx/.test(a)), include: ['test/**/*.test.js'] };
fs.writeFileSync(path.join(out, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
