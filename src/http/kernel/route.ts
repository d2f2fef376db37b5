import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { z } from 'zod';
import type { EventStore } from '../../eventstore/port.ts';
import { type CommandContext, type CommandResult, type Decider, handleCommand, type HandleOptions } from '../../eventstore/handler.ts';
import { isShared } from '../../projector/readcache.ts';
import type { Auth, Authenticator, AuthMode, Role } from './auth.ts';
import { ApiError, RawHttpError, sendResponse, toIssues, invalidMessage } from './errors.ts';
import { checkKey, type IdempotencyStore } from './idempotency.ts';
import { type IdemKey, idempotently } from './route-idempotency.ts';
import { type BodyText, checkInputText } from './input-text.ts';
import type { SharedRateLimiter } from './ratelimit.ts';
import type { Drain } from './drain.ts';
import type { PageSpec } from './openapi.ts';
import type { Ports } from '../../usecases/context.ts';
import type { KeyUsage } from '../../usecases/key-usage.ts';

// One way to declare a route: its zod schemas (params, query, body, responses),
// its credential, scope and role, whether it takes an Idempotency-Key, and its
// documented error codes. The same declaration drives validation, the handler's
// types, and the OpenAPI document.

export type { RunCommand } from '../../usecases/context.ts';

/** What a route reaches: the use cases' ports, and the HTTP layer's own parts. */
export type AppDeps = Ports & {
  auth: Authenticator;
  idempotency: IdempotencyStore;
  rateLimiter: SharedRateLimiter;
  /** Keys' last use and daily counts (src/usecases/key-usage.ts). */
  keyUsage?: KeyUsage;
  routes: RouteSpec[];
  /** Ends the open event streams when the instance drains (src/http/kernel/drain.ts). */
  drain: Drain;
  /** The HTML pages registered outside defineRoute (the OAuth consent page), for the OpenAPI document. */
  pages?: PageSpec[];
};

export type Reply = { status: number; body?: unknown; headers?: Record<string, string> };

export type Ctx<P, Q, B, A extends Auth> = {
  params: P;
  query: Q;
  body: B;
  auth: A;
  req: FastifyRequest;
  reply: FastifyReply;
  deps: AppDeps;
  /** Runs a command and waits until the read side has it (read-your-writes). */
  run<S, C>(decider: Decider<S, C>, stream: string, command: C, opts?: HandleOptions<S> & { orgId?: string; projectId?: string | null }): Promise<CommandResult<S>>;
};

type AuthFor<M extends AuthMode> = M extends 'org_admin' | 'key_or_service'
  ? Extract<Auth, { kind: 'api_key' | 'service' }>
  : M extends 'api_key'
  ? Extract<Auth, { kind: 'api_key' }>
  : M extends 'service' | 'human_session'
    ? Extract<Auth, { kind: 'service' }>
    : M extends 'platform'
      ? Extract<Auth, { kind: 'platform' }>
      : Extract<Auth, { kind: 'open' }>;

export type RouteSpec<P = unknown, Q = unknown, B = unknown, M extends AuthMode = AuthMode> = {
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE' | 'OPTIONS';
  url: string;
  operationId: string;
  summary: string;
  /** Longer prose for the OpenAPI operation (a flow the schemas cannot say). */
  description?: string;
  tags: string[];
  auth: M;
  /** The largest body this route reads, when not HTTP_BODY_MAX_BYTES (a 413 states it). */
  bodyLimit?: number;
  /** A page's form posts here (application/x-www-form-urlencoded read as the body); elsewhere under /v1 a form is 415. */
  acceptsForm?: boolean;
  scope?: string;
  minRole?: Role;
  /** The route also needs a person named in `x-svc-user` beside the API key (the OpenAPI security says so). */
  actingUser?: boolean;
  /**
   * The caller's right to this operation beyond its credential, scope and role
   * (an admin named beside a key, a role in the addressed project, a key bound
   * to one project): run right after authentication, before the body is read.
   * `params` are the raw path segments (not yet checked by their schema).
   */
  authorize?: (a: { auth: AuthFor<M>; params: Readonly<Record<string, string>>; req: FastifyRequest }) => Promise<void> | void;
  params?: z.ZodType<P>;
  query?: z.ZodType<Q>;
  body?: z.ZodType<B>;
  /** Whether a body may be omitted (treated as {}). */
  bodyOptional?: boolean;
  /** How the route treats some top-level body members' text the ledger cannot hold (src/http/kernel/input-text.ts); else invalid_body. */
  bodyText?: BodyText;
  responses: Record<number, z.ZodType | null>;
  /** Response headers worth documenting, by status: name → description. */
  responseHeaders?: Record<number, Record<string, string>>;
  /** The 200 answer's server-sent events, when the route also streams (documented as text/event-stream; a streamed body is not checked against `responses`). */
  sse?: z.ZodType;
  errors?: ReadonlyArray<readonly [number, string]>;
  idempotent?: boolean;
  deprecated?: boolean;
  handler: (ctx: Ctx<P, Q, B, AuthFor<M>>) => Promise<Reply>;
};

/** Header telling the client its write stands but the read side had not caught up in time. */
export const READ_SIDE_HEADER = 'x-svc-read-side';

function parseOr400<T>(schema: z.ZodType<T> | undefined, value: unknown, code: string, what: string): T {
  if (!schema) return value as T;
  const r = schema.safeParse(value);
  if (!r.success) {
    const issues = toIssues(r.error.issues);
    throw new ApiError(400, code, invalidMessage(what, issues), { issues });
  }
  return r.data;
}

function actorOf(auth: Auth): CommandContext['actor'] {
  switch (auth.kind) {
    case 'api_key':
      return { kind: 'api_key', id: auth.keyId };
    case 'service':
      return { kind: 'user', id: auth.userId };
    default:
      return { kind: 'system', id: 'platform' };
  }
}

/**
 * Response bodies that passed their schema, when they are shared read-cache
 * values (deeply frozen: src/projector/readcache.ts), so a hot GET checks the
 * same object once rather than on every request.
 */
const checkedBodies = new WeakMap<object, z.ZodType>();

/** Asserts a response on the way out: one that breaks its own schema is our bug. A shared read-cache body is checked once. */
function checkResponse(spec: RouteSpec, r: Reply, req: FastifyRequest): Reply {
  const schema = spec.responses[r.status];
  if (!schema || (spec.sse && r.headers?.['content-type']?.startsWith('text/event-stream'))) return r;
  // A body already serialized by another component (the MCP SDK's JSON-RPC answer) is passed through as it is; its schema documents it.
  if (typeof r.body === 'string') return r;
  const shared = isShared(r.body);
  if (shared && checkedBodies.get(r.body as object) === schema) return r;
  const result = schema.safeParse(r.body);
  if (!result.success) {
    req.log.error({ operation: spec.operationId, issues: result.error.issues }, 'response does not match its schema');
    throw new Error(`response of ${spec.operationId} does not match its schema`);
  }
  if (shared) checkedBodies.set(r.body as object, schema);
  return r;
}

/** Each request's credential, established by its route's onRequest hook. */
const admitted = new WeakMap<FastifyRequest, Auth>();

/**
 * The credential, the rate limit and the route's own authorization, in that
 * order, as an onRequest hook: before fastify reads the body (its media type,
 * its size, its JSON) and before anything is validated, so a caller without
 * the right gets its 401/403 whatever it sent and never learns a schema
 * (issue 40). A key already authenticated on this connection is not hashed
 * or looked up again, while the organization projection has not moved.
 */
function gate<M extends AuthMode>(deps: AppDeps, spec: RouteSpec<unknown, unknown, unknown, M>): onRequestHookHandler {
  const OPEN: Auth = { kind: 'open' };
  const authenticate = (req: FastifyRequest) => deps.auth.cached(req, spec.auth, spec.scope) ?? deps.auth.authenticate(req, spec.auth, spec.scope, spec.minRole);
  const run = async (req: FastifyRequest) => {
    let auth: Auth = OPEN;
    if (spec.auth !== 'open') {
      const at = deps.auth.version();
      // A refusal from the caches is not final either: the credential may be
      // one another instance just issued or widened (a refreshed token, a
      // promotion), so it is checked again once the positions are known.
      let first: Auth | { refused: RawHttpError | ApiError };
      try {
        first = await authenticate(req);
      } catch (err) {
        if (!(err instanceof RawHttpError || err instanceof ApiError)) throw err;
        first = { refused: err };
      }
      // One statement for every instance: the key's rate limit, and the
      // applied positions of the projections credentials come from. When
      // another instance acknowledged a change of keys, projects, users or
      // OAuth grants before this request came, the caches learn it here and
      // the credential is checked again.
      const { watched } = await deps.rateLimiter.take('kind' in first && first.kind === 'api_key' ? first.keyId : null);
      deps.auth.learn(watched);
      if (deps.auth.version() !== at) auth = await authenticate(req);
      else if ('refused' in first) throw first.refused;
      else auth = first;
    }
    admitted.set(req, auth);
    await spec.authorize?.({ auth: auth as AuthFor<M>, params: req.params as Record<string, string>, req });
  };
  return (req, _reply, done) => {
    if (spec.auth === 'open' && !spec.authorize) {
      admitted.set(req, OPEN);
      done();
      return;
    }
    run(req).then(() => done(), done);
  };
}

export function defineRoute<P, Q, B, M extends AuthMode>(app: FastifyInstance, deps: AppDeps, spec: RouteSpec<P, Q, B, M>): void {
  deps.routes.push(spec as unknown as RouteSpec);
  app.route({
    method: spec.method,
    url: spec.url,
    ...(spec.bodyLimit !== undefined ? { bodyLimit: spec.bodyLimit } : {}),
    ...(spec.acceptsForm ? { config: { acceptsForm: true } } : {}),
    onRequest: gate(deps, spec as unknown as RouteSpec<unknown, unknown, unknown, M>),
    handler: async (req, reply) => handle(deps, spec, req, reply),
  });
}

/** A request the gate admitted: its input checked, its handler run, its answer sent (through its Idempotency-Key when it takes one). */
async function handle<P, Q, B, M extends AuthMode>(deps: AppDeps, spec: RouteSpec<P, Q, B, M>, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const auth = admitted.get(req) as AuthFor<M> | undefined;
  if (!auth) throw new Error(`${spec.operationId}: no credential was established before its handler`);
  const { params, query, body } = parseInput(spec, req);
  // Whether this request has had a write acknowledged (its Idempotency-Key is then never released).
  const writes = { wrote: false };
  const ctx: Ctx<P, Q, B, AuthFor<M>> = { params, query, body, auth, req, reply, deps, run: runner(deps, auth, req, reply, writes) };

  // A GET's event stream goes through the drain: every SSE route is covered there, none needs to know.
  const checked = async (): Promise<Reply> => deps.drain.answer(spec.method, reply, checkResponse(spec as unknown as RouteSpec, await spec.handler(ctx), req));
  const idemHeader = req.headers['idempotency-key'];
  const idemKey = spec.idempotent && typeof idemHeader === 'string' ? idemHeader : undefined;
  if (idemKey === undefined || !('orgId' in auth)) return sendResponse(reply, await checked());

  checkKey(idemKey);
  const key: IdemKey = { orgId: auth.orgId, env: auth.kind === 'api_key' ? auth.environment : 'service', key: idemKey };
  return idempotently(deps, spec as unknown as RouteSpec, req, reply, key, checked, writes);
}

/** The path, query and body, each through its schema, then the rules on their text. */
function parseInput<P, Q, B, M extends AuthMode>(spec: RouteSpec<P, Q, B, M>, req: FastifyRequest): { params: P; query: Q; body: B } {
  const params = parseOr400(spec.params, req.params, 'invalid_params', 'path');
  const query = parseOr400(spec.query, req.query, 'invalid_query', 'query');
  let rawBody = req.body;
  if (rawBody === undefined && spec.bodyOptional) rawBody = {};
  if (spec.body && rawBody === undefined) throw new ApiError(400, 'invalid_body', 'a JSON body is required', { issues: [{ path: [], code: 'required', message: 'body required' }] });
  const body = parseOr400(spec.body, rawBody, 'invalid_body', 'body');
  // What the route takes, after its own rules (a code of its own first, say invalid_purpose_encoding).
  checkInputText(params, 'invalid_params', 'path');
  checkInputText(query, 'invalid_query', 'query');
  checkInputText(body, 'invalid_body', 'body', spec.bodyText);
  return { params, query, body };
}

/** The context's `run`: a command in the caller's organization and project, then read-your-writes. */
function runner(deps: AppDeps, auth: Auth, req: FastifyRequest, reply: FastifyReply, writes: { wrote: boolean }): Ctx<unknown, unknown, unknown, Auth>['run'] {
  return async (decider, stream, command, opts = {}) => {
    const orgId = opts.orgId ?? ('orgId' in auth ? auth.orgId : undefined);
    if (!orgId) throw new Error('a command needs an organization');
    const cctx: CommandContext = {
      orgId,
      projectId: opts.projectId !== undefined ? opts.projectId : auth.kind === 'api_key' ? auth.projectId : null,
      actor: actorOf(auth),
      requestId: String(req.id),
      now: deps.now,
    };
    const result = await handleCommand(deps.store, decider, stream, command, cctx, opts);
    if (result.lastPosition) writes.wrote = true;
    if (result.lastPosition && !(await deps.readSide.waitFor(result.lastPosition, deps.readWaitMs))) reply.header(READ_SIDE_HEADER, 'behind');
    return result;
  };
}
