// Every function over 80 lines in the given files (issue 41: route registrations read as tables).
//   npx tsx scripts/long-functions.ts $(git ls-files "src/**/*.ts")
import fs from 'node:fs';
import { functionSpans } from './function-spans.ts';

const spans = functionSpans(new Map(process.argv.slice(2).map((f) => [f, fs.readFileSync(f, 'utf8')])));
for (const s of spans.filter((x) => x.lines > 80).sort((a, b) => b.lines - a.lines)) console.log(s.lines, `${s.file}:${s.line} ${s.name ?? '(anon)'}`);
