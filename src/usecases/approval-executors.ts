import type { Run } from '../policy/evaluator.ts';
import type { Ports } from './context.ts';

// What runs a held call once a person approves it. Each family whose calls a
// policy can hold exports its executor from its use case file; the composition
// root (src/app.ts) lists them all in one ApprovalExecutors, passed down in the
// ports. Nothing registers itself by being imported.

/** The held call as approval execution reads it (the approvals read model's row). */
export type HeldCall = {
  id: string;
  org_id: string;
  project_id: string | null;
  session_id: string | null;
  agent_id: string;
  tool_name: string;
  tool_input: Record<string, unknown>;
  decided_by: string | null;
};

/** Runs an approved call with its verbatim input; answers the execution result, or throws a Rejection. */
export type ApprovalExecutor = (call: HeldCall, ports: Ports, run: Run) => Promise<Record<string, unknown>>;

/**
 * Executors by tool name: an exact name (`mandate.spend`), a prefix ending in
 * `/` (`acme-payments/`), or `*` + `/` for every provider tool `<server>/<tool>`.
 */
export class ApprovalExecutors {
  private readonly byName = new Map<string, ApprovalExecutor>();

  constructor(entries: Iterable<readonly [string, ApprovalExecutor]>) {
    for (const [name, fn] of entries) {
      if (this.byName.has(name)) throw new Error(`two approval executors for ${name}`);
      this.byName.set(name, fn);
    }
  }

  for(toolName: string): ApprovalExecutor | undefined {
    const exact = this.byName.get(toolName);
    if (exact) return exact;
    for (const [k, fn] of this.byName) if (k !== '*/' && k.endsWith('/') && toolName.startsWith(k)) return fn;
    return toolName.includes('/') ? this.byName.get('*/') : undefined;
  }
}
