// Loaded first into every test process (scripts/tap.ts puts it in
// NODE_OPTIONS): tap 21 starts each test process, and through NODE_OPTIONS each
// process a test starts, with @tapjs/processinfo, whose module loader records
// every file loaded, for coverage. The suite runs without coverage (package.json
// "disable-coverage"), and that loader alone cost 0.5 s of CPU per process
// (a hooks thread every import crosses: docs/performance.md, "The suite"), with
// no switch in tap to leave it out. Only its registration is skipped; the rest
// of processinfo (its process records, the environment it passes on) is left.
import module from 'node:module';

const register = module.register;
module.register = function (specifier, ...rest) {
  if (String(specifier).includes('/@tapjs/processinfo/')) return;
  return register.call(this, specifier, ...rest);
};
