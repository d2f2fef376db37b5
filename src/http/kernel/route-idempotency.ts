import type { FastifyReply, FastifyRequest } from 'fastify';
import { OutcomeUnknown } from '../../eventstore/port.ts';
import { ApiError, errorResponse, sendResponse } from './errors.ts';
import { requestHash } from './idempotency.ts';
import type { AppDeps, Reply, RouteSpec } from './route.ts';

// defineRoute's Idempotency-Key path (src/http/kernel/route.ts): the first answer
// replayed, or this request's kept under the key, or the key released when
// nothing may have been written.

/** An Idempotency-Key, in its organization and environment. */
export type IdemKey = { orgId: string; env: string; key: string };

/** A request under an Idempotency-Key: the first answer replayed, or this one's kept under the key. */
export async function idempotently(deps: AppDeps, spec: RouteSpec, req: FastifyRequest, reply: FastifyReply, k: IdemKey, checked: () => Promise<Reply>, writes: { wrote: boolean }): Promise<FastifyReply> {
  let hash: string;
  try {
    hash = requestHash(spec.method, req.url.split('?')[0]!, req.body);
  } catch {
    // No canonical form (a member the route ignores holds a lone surrogate, or nests past any limit).
    throw new ApiError(400, 'invalid_body', 'the body is invalid', { issues: [{ path: [], code: 'custom', message: 'the body has no canonical JSON form (well-formed text, bounded nesting)' }] });
  }
  const begun = await deps.idempotency.begin(k.orgId, k.env, k.key, hash);
  if (begun.kind === 'replay') {
    // The first response, but its request_id is this request's (it equals the X-Request-Id header).
    const b = begun.response.body as { request_id?: unknown } | null;
    const body = b && typeof b === 'object' && !Array.isArray(b) && typeof b.request_id === 'string' ? { ...b, request_id: String(req.id) } : begun.response.body;
    return sendResponse(reply, { ...begun.response, body, headers: { ...begun.response.headers, 'idempotent-replayed': 'true' } });
  }
  let response: Reply;
  try {
    response = await checked();
  } catch (err) {
    return failedUnderKey(deps, req, reply, k, err, writes.wrote);
  }
  await deps.idempotency.complete(k.orgId, k.env, k.key, { status: response.status, body: response.body ?? null, headers: response.headers ?? {} });
  return sendResponse(reply, response);
}

/** A failure under an Idempotency-Key: the key keeps its answer, or is released when nothing may have been written. */
async function failedUnderKey(deps: AppDeps, req: FastifyRequest, reply: FastifyReply, k: IdemKey, err: unknown, wrote: boolean): Promise<FastifyReply> {
  const r = errorResponse(err, String(req.id));
  if (r.status >= 500) {
    // A 5xx the route answers on purpose (a code of its own, which says
    // whether a retry is safe) is left as it was; an unexpected failure
    // after a write of this request was acknowledged, or a write the
    // store could not confirm either way, means the request may have
    // taken effect: running it again could do twice what it did once.
    const code = (r.body as { error?: { code?: string } } | undefined)?.error?.code;
    // The database unreachable or reloading (errors.ts) is as unexpected as an internal error once a write stood.
    const unexpected = code === 'internal_error' || code === 'store_unavailable' || code === 'store_recovering';
    if ((wrote && unexpected) || err instanceof OutcomeUnknown) {
      // The key keeps this answer.
      req.log.error({ err }, 'request failed after it may have written');
      const unknown = errorResponse(err instanceof OutcomeUnknown ? err : new OutcomeUnknown('the request failed after one of its writes was recorded', err), String(req.id));
      await deps.idempotency.complete(k.orgId, k.env, k.key, unknown).catch(() => {});
      return sendResponse(reply, unknown);
    }
    // Nothing may have been written: released, so a retry runs it.
    await deps.idempotency.release(k.orgId, k.env, k.key).catch(() => {});
    throw err;
  }
  await deps.idempotency.complete(k.orgId, k.env, k.key, r);
  return sendResponse(reply, r);
}
