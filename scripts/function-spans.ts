import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { computeLineStarts, isArrowFunction, isFunctionDeclaration, isFunctionExpression, isMethodDeclaration, isPropertyAssignment, isVariableDeclaration, type Node, type SourceFile } from 'typescript/unstable/ast';
import { API } from 'typescript/unstable/sync';

// Functions (declarations, methods, arrows and function expressions) of some
// TypeScript sources by their line span, parsed by the TypeScript compiler
// (its API, spoken to over its own process). Used by scripts/long-functions.ts
// and scripts/layer-figures.ts.

export type FunctionSpan = { file: string; line: number; lines: number; name: string | undefined };

/** The functions of `files` (path → text; the text need not be on disk). */
export function functionSpans(files: ReadonlyMap<string, string>): FunctionSpan[] {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'function-spans-'));
  const api = new API({ cwd: dir });
  try {
    const names = [...files.keys()];
    names.forEach((f, i) => fs.writeFileSync(path.join(dir, `f${i}.ts`), files.get(f)!));
    fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { noEmit: true, types: [], noResolve: true }, files: names.map((_f, i) => `f${i}.ts`) }));
    const project = api.updateSnapshot({ openProject: path.join(dir, 'tsconfig.json') }).getProject(path.join(dir, 'tsconfig.json'))!;
    const out: FunctionSpan[] = [];
    names.forEach((file, i) => {
      const sf = project.program.getSourceFile(path.join(dir, `f${i}.ts`)) as SourceFile;
      const starts = computeLineStarts(sf.text);
      const lineOf = (pos: number) => {
        let lo = 0;
        let hi = starts.length - 1;
        while (lo < hi) {
          const mid = (lo + hi + 1) >> 1;
          if (starts[mid]! <= pos) lo = mid;
          else hi = mid - 1;
        }
        return lo;
      };
      const text = (n: Node) => sf.text.slice(n.getStart(sf), n.end);
      const visit = (n: Node): undefined => {
        if (isFunctionDeclaration(n) || isMethodDeclaration(n) || isArrowFunction(n) || isFunctionExpression(n)) {
          const a = lineOf(n.getStart(sf));
          const b = lineOf(n.end);
          const own = (n as { name?: Node }).name;
          const name = own ? text(own) : isVariableDeclaration(n.parent) || isPropertyAssignment(n.parent) ? text(n.parent.name) : undefined;
          out.push({ file, line: a + 1, lines: b - a + 1, name });
        }
        n.forEachChild(visit);
        return undefined;
      };
      visit(sf);
    });
    return out;
  } finally {
    api.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
