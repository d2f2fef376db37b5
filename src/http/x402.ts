import { createHash } from 'node:crypto';
import * as ed from '@noble/ed25519';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { fauthDecider, fauthStream, nonceDecider, nonceStream, x402MandateDecider, x402MandateStream } from '../../commands/x402.ts';
import { isChecksummed } from '../adapters/chain/signature.ts';
import { checkShape, checkSignature, checkTime, uint as sharedUint, X402Refusal } from '../x402/verify.ts';
import { Rejection } from '../eventstore/handler.ts';
import { GuardFailed } from '../eventstore/port.ts';
import { ApiError } from './errors.ts';
import { newId } from './ids.ts';
import { defineRoute, type AppDeps } from './route.ts';
import { POLICY_ATTEMPTS, PolicyEngine, type Run } from '../policy/evaluator.ts';
import { policyRefusal } from '../usecases/policy-refusal.ts';
import type { ApprovalExecutor } from '../usecases/approval-executors.ts';
import type { Ports } from '../usecases/context.ts';
import { receiptJwks, signReceipt, type Network, type X402Deps } from '../adapters/chain/x402.ts';
import { IdParam, Timestamp, isoText as TS } from './schemas.ts';

// The x402 facilitator (spec 4.15): verifies a foreign EIP-3009 authorization
// in the spec's order, and only then writes the row and settles it. A 200
// means USDC moved on chain.

/** A settlement network with its USDC's real EIP-712 domain (Base Sepolia: "USDC"/"2"; Base: "USD Coin"/"2"). */

export { SKEW_SECONDS, EXPIRY_MARGIN_SECONDS } from '../x402/verify.ts';
const ATOMIC_PER_CENT = 10_000n; // USDC has 6 decimals; amounts in minor units are cents

const Digits = z.union([z.string(), z.number()]);
const Body = z.object({
  authorization: z.object({ from: z.string(), to: z.string(), value: Digits, validAfter: Digits, validBefore: Digits, nonce: z.string() }),
  domain: z.object({ name: z.string(), version: z.string(), chainId: z.number(), verifyingContract: z.string() }),
  signature: z.string(),
  intent: z.object({
    payee: z.string(),
    resource: z.string().min(1).max(2048),
    seller: z.string().max(200).optional(),
    purpose: z.string().max(1000).optional(),
    max_amount_minor: Digits,
    total_cap_minor: Digits,
    resource_url: z.string().max(2048).optional(),
  }),
});

/** The shared verification steps (src/x402/verify.ts), their refusals in this route's envelope. */
const refusal = (err: unknown): unknown => (err instanceof X402Refusal ? new ApiError(err.status, err.code, err.message, err.details) : err);
const asApi = <T>(f: () => T): T => {
  try {
    return f();
  } catch (err) {
    throw refusal(err);
  }
};
const uint = (v: string | number, field: string): bigint => asApi(() => sharedUint(v, field));



const FauthView = z
  .object({
    id: z.string(),
    kind: z.literal('x402'),
    signer: z.string(),
    payee: z.string(),
    nonce: z.string(),
    value_atomic: z.string(),
    amount_minor: z.number().int(),
    asset: z.string().nullable(),
    chain_id: z.number().int().nullable(),
    network: z.string().nullable(),
    status: z.enum(['verified', 'executed', 'rejected']),
    mandate_id: z.string(),
    execution_id: z.string().nullable(),
    receipt_id: z.string().nullable(),
    settlement_tx: z.string().nullable(),
    reject_code: z.string().nullable(),
    created_at: Timestamp,
  })
  .meta({ id: 'ForeignAuthorization' });

type ExecCtx = { auth: { orgId: string; projectId: string; environment: 'live' | 'test' }; deps: Ports; run: Run };

/**
 * An x402 execution: verification in the spec's order, the organization's
 * policies, the replay guard, the amount guard, the row, settlement. Shared by
 * the route and by an approved execution held by an approval-required policy.
 */
async function executeAuthorization(c: ExecCtx, input: unknown, approvedBy: string | null) {
    const { auth, deps, run } = c;
    const x = deps.x402;
    if (!x) throw new ApiError(503, 'facilitator_unavailable', 'the facilitator is not configured', { retriable: true });
    // Network: a live credential asking mainnet the operator has not enabled is refused before any other work.
    const network = auth.environment === 'live' ? x.live : x.test;
    if (!network) throw new ApiError(501, 'mainnet_not_enabled', 'settlement on base (mainnet) is not enabled by the operator');

    // Shape.
    const parsed = Body.safeParse(input);
    if (!parsed.success) {
      const missing = parsed.error.issues.some((i) => i.code === 'invalid_type' && /received undefined/.test(i.message));
      throw new ApiError(400, missing ? 'missing_required_field' : 'invalid_payload', 'the body is missing fields or has the wrong types', {
        issues: parsed.error.issues.map((i) => ({ path: i.path.map(String), code: i.code, message: i.message })),
      });
    }
    const { authorization: a, domain, signature, intent } = parsed.data;
    const value = uint(a.value, 'authorization.value');
    const validAfter = uint(a.validAfter, 'authorization.validAfter');
    const validBefore = uint(a.validBefore, 'authorization.validBefore');
    const maxMinor = uint(intent.max_amount_minor, 'intent.max_amount_minor');
    const totalMinor = uint(intent.total_cap_minor, 'intent.total_cap_minor');
    const checked = asApi(() => checkShape(a, [['domain.verifyingContract', domain.verifyingContract], ['intent.payee', intent.payee]]));
    if (!Number.isInteger(domain.chainId) || domain.chainId <= 0 || domain.chainId > 2 ** 53 - 1) throw new ApiError(400, 'malformed_authorization', 'domain.chainId is out of range', { field: 'domain.chainId' });
    if (domain.chainId !== network.chainId) throw new ApiError(400, 'network_mismatch', `a ${auth.environment} credential settles on ${network.name} (chain ${network.chainId})`, { expected_chain_id: network.chainId });
    if (domain.verifyingContract !== network.token) throw new ApiError(400, 'unsupported_asset', `only USDC (${network.token}) is settled on ${network.name}`);

    // Signature, recovered under the token's real domain: a wrong domain name in the
    // request does not fail to verify, it recovers another address.
    const signer = await checkSignature(network, checked, signature).catch((err: unknown) => {
      throw refusal(err);
    });

    // Time, from the service's own clock.
    asApi(() => checkTime(checked, deps.now()));

    // Payee binding.
    if (intent.payee !== a.to) throw new ApiError(422, 'payee_authorization_mismatch', 'intent.payee must be authorization.to');

    // The organization's policies: tool `x402.execute`, the signer as the agent,
    // the amount in USDC cents; then the replay guard (the (signer, nonce)
    // claim), the amount guard against the internal mandate (one per
    // organization, signer, payee and resource), and the verified row. The
    // policies come from this process's folded copy first, without a read; the
    // row (the last write before money moves) is appended under the policy
    // stream's revision, so a change acknowledged anywhere before it refuses
    // the row (nothing written): the claim and the reservation are released
    // and the execution is evaluated again on a fresh read (as spends are).
    const amountMinor = (value + ATOMIC_PER_CENT - 1n) / ATOMIC_PER_CENT;
    const key = createHash('sha256').update(`${auth.orgId}\n${signer}\n${a.to}\n${intent.resource}`).digest('hex').slice(0, 32);
    const mandateId = `x402mdt_${key.slice(0, 16)}`;
    const at = () => deps.now().toISOString();
    let fauthId: string;
    for (let attempt = 1; ; attempt++) {
      const outcome = await new PolicyEngine(deps.store, deps.now).evaluate(
        { orgId: auth.orgId, projectId: auth.projectId, agentId: signer, toolName: 'x402.execute', toolInput: input as Record<string, unknown>, amountMinor, currency: 'USDC', approvedBy },
        run,
        { fromCache: attempt === 1 },
      );
      if (outcome.decision !== 'allowed') throw policyRefusal(outcome);
      fauthId = newId('fauth');
      try {
        await run(nonceDecider, nonceStream(signer, a.nonce), { type: 'claim', signer, nonce: a.nonce, fauthId }, { serialize: true });
      } catch (err) {
        await outcome.release();
        throw err;
      }
      try {
        if (network.name === 'base' && amountMinor > x.mainnetCeilingMinor) throw new Rejection('x402_mainnet_cap_exceeded', `mainnet executions are capped at ${x.mainnetCeilingMinor} cents`);
        await run(
          x402MandateDecider,
          x402MandateStream(key),
          { type: 'reserve', open: { mandateId, orgId: auth.orgId, signer, payee: a.to, resource: intent.resource, perTx: maxMinor, total: totalMinor }, fauthId, amount: amountMinor },
          { serialize: true },
        );
      } catch (err) {
        // Refused before the row: release the claim, so no row and no spent nonce remain.
        await run(nonceDecider, nonceStream(signer, a.nonce), { type: 'release', fauthId, reason: err instanceof Rejection ? err.code : 'error' }, { serialize: true });
        await outcome.release();
        if (err instanceof Rejection) throw new ApiError(422, err.code, err.message, err.details);
        throw err;
      }
      try {
        await run(
          fauthDecider,
          fauthStream(fauthId),
          {
            type: 'record',
            events: [
              {
                type: 'x402.authorization_verified',
                data: {
                  foreign_authorization_id: fauthId,
                  org_id: auth.orgId,
                  project_id: auth.projectId,
                  signer,
                  payee: a.to,
                  nonce: a.nonce.toLowerCase(),
                  value_atomic: value.toString(),
                  amount_minor: amountMinor.toString(),
                  asset: network.token,
                  chain_id: network.chainId,
                  network: network.name,
                  mandate_id: mandateId,
                  mandate_key: key,
                  valid_after: validAfter.toString(),
                  valid_before: validBefore.toString(),
                  signature,
                  intent: parsed.data.intent as Record<string, unknown>,
                  at: at(),
                },
              },
            ],
          },
          { expectedRevision: 'no_stream', guard: outcome.guard },
        );
        break;
      } catch (err) {
        if (!(err instanceof GuardFailed)) throw err;
        // The policies moved: nothing of the row was written; undo the reservation and the claim, and decide again.
        await run(x402MandateDecider, x402MandateStream(key), { type: 'release', fauthId, amount: amountMinor }, { serialize: true });
        await run(nonceDecider, nonceStream(signer, a.nonce), { type: 'release', fauthId, reason: 'policies_changed' }, { serialize: true });
        await outcome.release();
        if (attempt >= POLICY_ATTEMPTS) throw new Rejection('concurrency_conflict', 'the policies kept changing; retry the request', { attempts: attempt });
      }
    }

    // Settlement.
    const result = await network.settlement.settle({ from: a.from as `0x${string}`, to: a.to as `0x${string}`, value, validAfter, validBefore, nonce: a.nonce as `0x${string}` }, signature as `0x${string}`);
    if (result.outcome === 'settled') {
      const executionId = newId('x402exec');
      const receiptId = newId('rcpt');
      const receipt = signReceipt(x, {
        id: receiptId,
        foreign_authorization_id: fauthId,
        execution_id: executionId,
        network: network.name,
        chain_id: network.chainId,
        asset: network.token,
        signer,
        payee: a.to,
        value_atomic: value.toString(),
        tx_hash: result.txHash,
        settled_at: at(),
      });
      await run(fauthDecider, fauthStream(fauthId), { type: 'record', events: [{ type: 'x402.executed', data: { foreign_authorization_id: fauthId, execution_id: executionId, tx_hash: result.txHash, adapter: network.adapter, receipt_id: receiptId, receipt, at: at() } }] });
      return {
        status: 200,
        body: {
          status: 'executed',
          foreign_authorization_id: fauthId,
          mandate_id: mandateId,
          execution_id: executionId,
          signer,
          settlement: { tx_hash: result.txHash, network: network.name, money_moved: true, adapter: network.adapter },
          receipt: { id: receiptId, state: 'signed', chain: network.name },
        },
      };
    }
    if (result.outcome === 'unknown') {
      await run(fauthDecider, fauthStream(fauthId), { type: 'record', events: [{ type: 'x402.settlement_unknown', data: { foreign_authorization_id: fauthId, tx_hash: result.txHash, detail: result.reason, at: at() } }] });
      throw new ApiError(502, 'settlement_outcome_unknown', 'a transaction was broadcast but its outcome is not known yet; the authorization stays open until the chain answers', { tx_hash: result.txHash, outcome: 'unknown', foreign_authorization_id: fauthId });
    }
    const txHash = result.outcome === 'reverted' ? result.txHash : null;
    await run(fauthDecider, fauthStream(fauthId), { type: 'record', events: [{ type: 'x402.rejected', data: { foreign_authorization_id: fauthId, reject_code: 'settlement_failed', detail: result.reason, tx_hash: txHash, at: at() } }] });
    await run(x402MandateDecider, x402MandateStream(key), { type: 'release', fauthId, amount: amountMinor }, { serialize: true });
    throw new ApiError(502, 'settlement_failed', `settlement failed: ${result.reason}`, { foreign_authorization_id: fauthId, tx_hash: txHash, money_moved: false });
}

// An approved `x402.execute` runs the held request body verbatim; the network follows its chain id.
export const x402ExecuteExecutor: ApprovalExecutor = async (a, deps, run) => {
  if (!a.project_id) throw new ApiError(409, 'invalid_transition', 'the held execution has no project');
  const chainId = (a.tool_input as { domain?: { chainId?: unknown } }).domain?.chainId;
  const environment = chainId === deps.x402?.live?.chainId ? 'live' : 'test';
  const r = await executeAuthorization({ auth: { orgId: a.org_id, projectId: a.project_id, environment }, deps, run }, a.tool_input, a.decided_by ?? 'approval');
  return r.body as Record<string, unknown>;
};

export async function x402Routes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  defineRoute(app, deps, {
    method: 'GET',
    url: '/.well-known/receipt-keys.json',
    operationId: 'receiptKeys',
    summary: 'The public keys that sign x402 receipts, as a JWKS (OKP / Ed25519)',
    tags: ['facilitator'],
    auth: 'open',
    responses: { 200: z.object({ keys: z.array(z.record(z.string(), z.string())) }) },
    async handler({ deps }) {
      return { status: 200, body: deps.x402 ? receiptJwks(deps.x402) : { keys: [] } };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/facilitator/x402/executions',
    operationId: 'executeX402Authorization',
    summary: 'Verify a foreign EIP-3009 authorization and settle it; a 200 means USDC moved',
    tags: ['facilitator'],
    auth: 'api_key',
    scope: 'facilitator:write',
    body: z.record(z.string(), z.unknown()),
    responses: {
      200: z.object({
        status: z.literal('executed'),
        foreign_authorization_id: z.string(),
        mandate_id: z.string(),
        execution_id: z.string(),
        signer: z.string(),
        settlement: z.object({ tx_hash: z.string(), network: z.string(), money_moved: z.literal(true), adapter: z.string() }),
        receipt: z.object({ id: z.string(), state: z.string(), chain: z.string() }),
      }),
    },
    errors: [
      [400, 'missing_required_field'],
      [400, 'invalid_payload'],
      [400, 'malformed_authorization'],
      [400, 'network_mismatch'],
      [400, 'unsupported_asset'],
      [401, 'bad_signature'],
      [401, 'signer_mismatch'],
      [409, 'authorization_already_used'],
      [422, 'authorization_not_yet_valid'],
      [422, 'authorization_expired'],
      [422, 'payee_authorization_mismatch'],
      [422, 'per_tx_cap_exceeded'],
      [422, 'total_cap_exceeded'],
      [422, 'x402_mainnet_cap_exceeded'],
      [501, 'mainnet_not_enabled'],
      [502, 'settlement_failed'],
      [502, 'settlement_outcome_unknown'],
      [503, 'facilitator_unavailable'],
    ],
    async handler(ctx) {
      return executeAuthorization({ auth: ctx.auth, deps: ctx.deps, run: ctx.run }, ctx.body, null);
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/facilitator/x402/executions/:id',
    operationId: 'getX402Execution',
    summary: 'A foreign authorization (404 for another organization’s, and for refusals that wrote no row)',
    tags: ['facilitator'],
    auth: 'api_key',
    scope: 'facilitator:read',
    params: z.object({ id: IdParam }),
    responses: { 200: FauthView },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler({ auth, params, deps }) {
      const { rows } = await deps.db.query<z.infer<typeof FauthView>>(
        `SELECT id, 'x402' AS kind, signer, payee, nonce, value_atomic::text, amount_minor::int, asset, chain_id, network, status, mandate_id, execution_id, receipt_id, settlement_tx, reject_code, ${TS('created_at')} AS created_at
         FROM foreign_authorizations WHERE id = $1 AND org_id = $2`,
        [params.id, auth.orgId],
      );
      if (!rows[0]) throw new ApiError(404, 'not_found', 'foreign authorization not found');
      return { status: 200, body: rows[0] };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/test/x402/faucet',
    operationId: 'x402TestFaucet',
    summary: 'Mint test USDC on the local chain to an address (test keys only)',
    tags: ['facilitator', 'sandbox'],
    auth: 'api_key',
    scope: 'facilitator:write',
    body: z.object({ address: z.string(), value_atomic: z.string().regex(/^[1-9]\d{0,15}$/) }),
    responses: { 200: z.object({ address: z.string(), value_atomic: z.string(), tx_hash: z.string(), balance_atomic: z.string() }) },
    errors: [[400, 'invalid_body'], [400, 'malformed_authorization'], [401, 'unauthorized'], [403, 'sandbox_funding_not_permitted'], [503, 'facilitator_unavailable']],
    async handler({ auth, body, deps }) {
      if (auth.environment !== 'test') throw new ApiError(403, 'sandbox_funding_not_permitted', 'the faucet takes test keys only');
      const net = deps.x402?.test;
      if (!net) throw new ApiError(503, 'facilitator_unavailable', 'no test network is configured', { retriable: true });
      if (!isChecksummed(body.address)) throw new ApiError(400, 'malformed_authorization', 'address is not an EIP-55 checksummed address', { field: 'address' });
      const txHash = await net.settlement.mint(body.address as `0x${string}`, BigInt(body.value_atomic));
      const balance = await net.settlement.balanceOf(body.address as `0x${string}`);
      return { status: 200, body: { address: body.address, value_atomic: body.value_atomic, tx_hash: txHash, balance_atomic: balance.toString() } };
    },
  });
}
