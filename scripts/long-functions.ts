// Every function over 80 lines in the given files (issue 41: route registrations read as tables).
//   npx tsx scripts/long-functions.ts $(git ls-files "src/**/*.ts")
import fs from 'node:fs'; import ts from 'typescript';
const files = process.argv.slice(2);
const out: [number,string][] = [];
for (const f of files) { const sf = ts.createSourceFile(f, fs.readFileSync(f,'utf8'), ts.ScriptTarget.Latest, true);
 const visit = (n: ts.Node) => { if (ts.isFunctionDeclaration(n)||ts.isMethodDeclaration(n)||ts.isArrowFunction(n)||ts.isFunctionExpression(n)) { const a = sf.getLineAndCharacterOfPosition(n.getStart(sf)).line; const b = sf.getLineAndCharacterOfPosition(n.getEnd()).line; let name=(n as any).name?.getText(sf); if(!name&&ts.isVariableDeclaration(n.parent)) name=n.parent.name.getText(sf); if(!name&&ts.isPropertyAssignment(n.parent)) name=n.parent.name.getText(sf); if (b-a+1>80) out.push([b-a+1, `${f}:${a+1} ${name??'(anon)'}`]); } ts.forEachChild(n, visit); }; visit(sf); }
out.sort((a,b)=>b[0]-a[0]); for (const [n,s] of out) console.log(n, s);
