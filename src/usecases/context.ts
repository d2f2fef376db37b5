import type { Actor } from '../../events/common.ts';
import type { CommandResult, Decider, HandleOptions } from '../eventstore/handler.ts';
import type { EventStore } from '../eventstore/port.ts';
import type { Db } from '../postgres/db.ts';
import type { ReadSide } from '../readside.ts';
import type { ReadCache } from '../projector/readcache.ts';
import type { Vault } from '../adapters/vault.ts';
import type { Bank } from '../adapters/bank/port.ts';
import type { X402Deps } from '../adapters/chain/x402.ts';
import type { PixDeps } from '../adapters/psp/port.ts';
import type { AllowedTargets } from '../adapters/outbound-http.ts';
import type { WebhookDispatcher } from '../reactors/webhooks.ts';
import type { ProviderTools } from '../providers/tools.ts';
import type { McpConfig } from '../mcp/config.ts';
import type { BrowserWorker } from '../adapters/browser/worker.ts';
import type { MerchantSites } from '../adapters/merchants/sites.ts';
import type { WitnessEndpoint } from '../audit/witness-client.ts';
import type { ApprovalExecutors } from './approval-executors.ts';

// The application layer's floor plan. A use case (src/usecases/<feature>.ts)
// takes plain input and a context, and returns a result or throws a
// `Rejection` (src/eventstore/handler.ts) with a stable code; it knows nothing
// of fastify, status codes or OpenAPI. Every surface calls the same use cases:
// the HTTP routes (src/http, which map rejection codes to statuses in
// src/http/kernel/errors.ts), the MCP endpoints, the agent loop, approval execution,
// reactors and the CLI. Imports only go down:
//   src/http → src/usecases → commands, projections, adapters → src/eventstore → events

/** The ports and settings a use case may reach: everything the runtime composes, nothing of HTTP. */
export type Ports = {
  db: Db;
  store: EventStore;
  readSide: Pick<ReadSide, 'waitFor'>;
  /** Lookups of the organization read model (keys, projects, users), valid while it has not moved. */
  orgCache: ReadCache<unknown>;
  now: () => Date;
  readWaitMs: number;
  /** Open sessions an organization may hold. */
  sessionQuota: number;
  /** Public base URL of this service (links, OpenAPI servers). */
  baseUrl: string;
  /** The did:web domain of agent identities (host, with a port as %3A<port>). */
  didDomain: string;
  vault: Vault;
  /** The outbound webhook reactor, when this process runs it. */
  webhooks: WebhookDispatcher | undefined;
  /** The x402 facilitator's networks and receipt key, when configured. */
  x402: X402Deps | undefined;
  /** The sandbox and live PSPs of Pix. */
  pix: PixDeps;
  /** Configured banks by bank_id (the sandbox bank in the embedded default and tests). */
  banks: Map<string, Bank>;
  /** Which private targets outbound HTTP (webhooks) may reach. */
  webhookTargets: AllowedTargets;
  /** The provider catalog, its HTTP adapter and the tool executor over connections. */
  providers: ProviderTools;
  /** Monetized MCP servers: gateway base, upstream timeouts, sweep lease (defaults from baseUrl when absent). */
  mcp?: McpConfig;
  /** The login pages of the hosted-connect merchants (sandbox merchants by default; MERCHANT_*_LOGIN_URL). */
  merchants: MerchantSites;
  /** The browser worker when the builder chose one (null: none, answers 503); absent: from the environment (workerOf). */
  browserWorker?: BrowserWorker | null;
  /** The witnesses of AUDIT_WITNESSES (the audit health view shows each one's lag). */
  auditWitnesses?: readonly WitnessEndpoint[];
  /** What runs a held call once a person approves it, by tool name (listed by the composition root). */
  approvalExecutors: ApprovalExecutors;
  /** How a held call's failed execution is recorded on its approval (the error body the call would have answered); every surface that decides uses it. */
  approvalFailure?: (err: unknown) => Record<string, unknown>;
};

/** How a command runs: a request's run (waits for the read side) or a reactor's own handleCommand. */
export type RunCommand = <S, C>(decider: Decider<S, C>, stream: string, command: C, opts?: HandleOptions<S> & { orgId?: string; projectId?: string | null }) => Promise<CommandResult<S>>;

/** Whose request a use case serves. `projectId` is null for organization-wide work. */
export type Tenant = { orgId: string; projectId: string };

/** What every use case receives besides its input. */
export type UseCaseCtx = {
  ports: Ports;
  tenant: Tenant;
  actor: Actor;
  requestId: string | null;
  /** Runs a command (from a request: and waits until the read side has it). */
  run: RunCommand;
};
