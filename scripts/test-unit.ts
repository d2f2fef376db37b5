import fs from 'node:fs';
import path from 'node:path';
import { runTap } from './tap.ts';

// `npm run test:unit`: the test files that need no database, browser, chain or
// child process, for a contributor's quick loop (deciders, hashing and formats,
// configuration, architecture rules). A file is chosen by what it imports: one
// that reaches a ledger, a database, Chromium, the local chain or a spawned
// process runs only in `npm test`. New files are classified the same way.

const root = path.resolve(import.meta.dirname, '..');
const HEAVY = /testDatabase|testApp|testLedger|testStores|launchChromium|findChromium|embeddedWorker|startService|startLocalChain|startCluster|helpers\/(db|app|ledger|cluster|pix|x402|oauth|balancer|service)|startEmbedded|spawn\(|esdb-double|EventStoreDBStore|from 'pg'/;

function testFiles(dir: string): string[] {
  return fs.readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = path.join(dir, e.name);
    return e.isDirectory() ? testFiles(rel) : e.name.endsWith('.test.ts') ? [rel] : [];
  });
}

const files = testFiles('test').filter((f) => !HEAVY.test(fs.readFileSync(path.join(root, f), 'utf8'))).sort();
console.log(`# ${files.length} test files that need no database, browser or chain`);
process.exit(await runTap([...process.argv.slice(2), ...files]));
