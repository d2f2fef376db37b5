// How a test starts one of the project's programs (`src/main.ts`, `src/cli.ts`,
// a fixture) in a child process. `npm test` runs the suite compiled
// (scripts/build-tree.mjs): the child then runs the compiled program too, as
// the parent does, without tsx's loader; a file run through tsx (`npx tap
// test/x.test.ts`) starts the TypeScript through tsx. test/runtime/startup.test.ts
// keeps the exact command `npm start` runs.

export const compiled = import.meta.url.endsWith('.js');

/** Node's arguments to run `entry` (a path relative to the project's root, ending in .ts). */
export function nodeArgs(entry: string): string[] {
  return compiled ? [entry.replace(/\.tsx?$/, '.js')] : ['--import', 'tsx', entry];
}
