import type { FastifyRequest } from 'fastify';
import type { RunCommand } from '../usecases/context.ts';
import { type DashboardDeps, personRun } from './context.ts';
import type { Person } from './session.ts';

/**
 * Runs a command as the person (actor `user`) in the project the header's
 * switcher chose: its events carry that project in their metadata, as the
 * same command sent with a key of that project does.
 */
export function projectRun(deps: DashboardDeps, req: FastifyRequest, person: Person): RunCommand {
  const run = personRun(deps, req, person);
  return (decider, stream, command, opts = {}) => run(decider, stream, command, { projectId: person.projectId, ...opts });
}
