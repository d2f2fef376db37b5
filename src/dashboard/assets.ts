import { createRequire } from 'node:module';
import { hash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

// The dashboard's static files, served by @fastify/static under
// /dashboard/assets/ with content-hashed names (computed once, at start), so
// each can be cached forever (immutable) and a changed file is a new URL. No
// build step: our own files sit beside this module, the libraries' browser
// bundles are read from node_modules as installed.

const require = createRequire(import.meta.url);
const own = (name: string) => path.join(import.meta.dirname, 'assets', name);
/** A file of an installed package: its root found upward from its entry point (some packages export no package.json). */
function libFile(pkg: string, rel: string): string {
  let dir = path.dirname(require.resolve(pkg));
  while (!fs.existsSync(path.join(dir, 'package.json')) || JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).name !== pkg) {
    const up = path.dirname(dir);
    if (up === dir) throw new Error(`no package root for ${pkg}`);
    dir = up;
  }
  return path.join(dir, rel);
}

/** Logical name → file on disk. */
const FILES: Record<string, string> = {
  'dashboard.css': own('dashboard.css'),
  'dashboard.js': own('dashboard.js'),
  'chart.js': own('chart.js'),
  'series-chart.js': own('series-chart.js'),
  'locale-guard.js': own('locale-guard.js'),
  'passkey.js': own('passkey.js'),
  'live.js': own('live.js'),
  'flows.css': own('flows.css'),
  'money.css': own('money.css'),
  'verify-entry.js': own('verify-entry.js'),
  'webhooks-chart.js': own('webhooks-chart.js'),
  'noble-ed25519.js': libFile('@noble/ed25519', 'index.js'),
  'htmx.js': libFile('htmx.org', 'dist/htmx.min.js'),
  'uplot.js': libFile('uplot', 'dist/uPlot.iife.min.js'),
  'uplot.css': libFile('uplot', 'dist/uPlot.min.css'),
  'simplewebauthn.js': libFile('@simplewebauthn/browser', 'dist/bundle/index.umd.min.js'),
};

export type Asset = { name: string; file: string; hashed: string; type: string };

const TYPES: Record<string, string> = { '.css': 'text/css; charset=utf-8', '.js': 'text/javascript; charset=utf-8' };

function load(): Map<string, Asset> {
  const out = new Map<string, Asset>();
  for (const [name, file] of Object.entries(FILES)) {
    const digest = hash('sha256', fs.readFileSync(file), 'hex').slice(0, 16);
    const ext = path.extname(name);
    out.set(name, { name, file, hashed: `${path.basename(name, ext)}.${digest}${ext}`, type: TYPES[ext] ?? 'application/octet-stream' });
  }
  return out;
}

const assets = load();
const byHashed = new Map([...assets.values()].map((a) => [a.hashed, a]));

/** The URL of an asset by its logical name (`dashboard.css`): its hashed name under /dashboard/assets/. */
export function assetUrl(name: string): string {
  const a = assets.get(name);
  if (!a) throw new Error(`no dashboard asset ${name}`);
  return `/dashboard/assets/${a.hashed}`;
}

/** The asset a hashed name serves, if any. */
export const assetByHashedName = (hashed: string): Asset | undefined => byHashed.get(hashed);

/** An asset's text by its logical name: a page served from another origin inlines the stylesheet (one source, no copy). */
export function assetText(name: string): string {
  const a = assets.get(name);
  if (!a) throw new Error(`no dashboard asset ${name}`);
  return fs.readFileSync(a.file, 'utf8');
}
