import path from 'node:path';
import { Worker } from 'node:worker_threads';

/**
 * A worker thread running one module of this folder (named without its
 * extension). The service runs its TypeScript through tsx, whose loader a
 * worker does not inherit: the worker registers it first, then imports its
 * entry. Compiled (the test suite runs so: scripts/build-tree.mjs), the entry
 * is imported as is.
 */
export function moduleWorker(name: string, workerData: unknown): Worker {
  const entry = JSON.stringify(new URL(`./${name}${path.extname(import.meta.url)}`, import.meta.url).href);
  const boot = import.meta.url.endsWith('.js') ? `import(${entry})` : `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then((m) => { m.register(); return import(${entry}); })`;
  return new Worker(boot, { eval: true, workerData });
}
