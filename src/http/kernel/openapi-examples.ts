import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

// The examples of the reference are real answers: recorded from the test
// suite's own requests (CONTRACT_RECORD=contracts/examples, see
// test/helpers/contract.ts), one file per operation id, secrets kept to their
// prefix. test/http/openapi-lint.test.ts holds each to its schema, so an
// example that no longer matches the operation fails the suite.

export type Example = { status: number; request?: unknown; response?: unknown };

const DIR = path.resolve(import.meta.dirname, '..', '..', '..', 'contracts', 'examples');

let loaded: Map<string, Example> | undefined;

/** The recorded examples by operation id. */
export function examples(): Map<string, Example> {
  if (loaded) return loaded;
  loaded = new Map();
  if (!existsSync(DIR)) return loaded;
  for (const f of readdirSync(DIR)) {
    if (f.endsWith('.json')) loaded.set(f.slice(0, -5), JSON.parse(readFileSync(path.join(DIR, f), 'utf8')) as Example);
  }
  return loaded;
}
