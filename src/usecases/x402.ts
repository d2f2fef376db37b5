import { createHash } from 'node:crypto';
import { z } from 'zod';
import { fauthDecider, fauthStream, nonceDecider, nonceStream, x402MandateDecider, x402MandateStream } from '../../commands/x402.ts';
import { signReceipt } from '../adapters/chain/x402.ts';
import { checkShape, checkSignature, checkTime, uint as sharedUint, X402Refusal } from '../x402/verify.ts';
import { Rejection } from '../eventstore/handler.ts';
import { GuardFailed } from '../eventstore/port.ts';
import { newId } from '../ids.ts';
import { POLICY_ATTEMPTS, PolicyEngine } from '../policy/evaluator.ts';
import { policyRefusal } from './policy-refusal.ts';
import type { ApprovalExecutor } from './approval-executors.ts';
import type { Ports, RunCommand } from './context.ts';

// The x402 facilitator's execution (spec 4.15): verifies a foreign EIP-3009
// authorization in the spec's order, and only then writes the row and settles
// it. Reached by the execution route and by an approved held `x402.execute`.
// Refusals are rejections; src/http/kernel/errors.ts maps each code to the spec's
// status (REJECTION_STATUS).

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

/** The shared verification steps (src/x402/verify.ts): their refusals as plain rejections of the same code. */
const refusal = (err: unknown): unknown => (err instanceof X402Refusal ? new Rejection(err.code, err.message, err.details) : err);
const checked = <T>(f: () => T): T => {
  try {
    return f();
  } catch (err) {
    throw refusal(err);
  }
};
const uint = (v: string | number, field: string): bigint => checked(() => sharedUint(v, field));

export type ExecutionResult = {
  status: 'executed';
  foreign_authorization_id: string;
  mandate_id: string;
  execution_id: string;
  signer: string;
  settlement: { tx_hash: string; network: string; money_moved: true; adapter: string };
  receipt: { id: string; state: string; chain: string };
};

/** Who executes: the tenant, and the environment of the credential (live settles on base, test on base-sepolia). */
export type ExecCtx = { ports: Ports; tenant: { orgId: string; projectId: string }; environment: 'live' | 'test'; run: RunCommand };

type Network = NonNullable<NonNullable<Ports['x402']>['live']>;
type Body = z.infer<typeof Body>;
/** A verified authorization: what the row and the settlement need. */
type Verified = { body: Body; network: Network; signer: string; value: bigint; validAfter: bigint; validBefore: bigint; maxMinor: bigint; totalMinor: bigint };
/** The row's identities once the policies, the replay guard and the amount guard let it through. */
type Recorded = { fauthId: string; key: string; mandateId: string; amountMinor: bigint };

/**
 * An x402 execution: verification in the spec's order, the organization's
 * policies, the replay guard, the amount guard, the row, settlement. Shared by
 * the route and by an approved execution held by an approval-required policy.
 */
export async function executeAuthorization(c: ExecCtx, input: unknown, approvedBy: string | null): Promise<ExecutionResult> {
  const v = await verify(c, input);
  const r = await record(c, v, input, approvedBy);
  return settle(c, v, r);
}

/** Network, shape, addresses, signature, time and payee binding: nothing is written before these pass. */
async function verify(c: ExecCtx, input: unknown): Promise<Verified> {
  const x = c.ports.x402;
  if (!x) throw new Rejection('facilitator_unavailable', 'the facilitator is not configured', { retriable: true });
  // Network: a live credential asking mainnet the operator has not enabled is refused before any other work.
  const network = c.environment === 'live' ? x.live : x.test;
  if (!network) throw new Rejection('mainnet_not_enabled', 'settlement on base (mainnet) is not enabled by the operator');

  // Shape.
  const parsed = Body.safeParse(input);
  if (!parsed.success) {
    const missing = parsed.error.issues.some((i) => i.code === 'invalid_type' && /received undefined/.test(i.message));
    throw new Rejection(missing ? 'missing_required_field' : 'invalid_payload', 'the body is missing fields or has the wrong types', {
      issues: parsed.error.issues.map((i) => ({ path: i.path.map(String), code: i.code, message: i.message })),
    });
  }
  const { authorization: a, domain, signature, intent } = parsed.data;
  const value = uint(a.value, 'authorization.value');
  const validAfter = uint(a.validAfter, 'authorization.validAfter');
  const validBefore = uint(a.validBefore, 'authorization.validBefore');
  const maxMinor = uint(intent.max_amount_minor, 'intent.max_amount_minor');
  const totalMinor = uint(intent.total_cap_minor, 'intent.total_cap_minor');
  const shaped = checked(() => checkShape(a, [['domain.verifyingContract', domain.verifyingContract], ['intent.payee', intent.payee]]));
  if (!Number.isInteger(domain.chainId) || domain.chainId <= 0 || domain.chainId > 2 ** 53 - 1) throw new Rejection('malformed_authorization', 'domain.chainId is out of range', { field: 'domain.chainId' });
  if (domain.chainId !== network.chainId) throw new Rejection('network_mismatch', `a ${c.environment} credential settles on ${network.name} (chain ${network.chainId})`, { expected_chain_id: network.chainId });
  if (domain.verifyingContract !== network.token) throw new Rejection('unsupported_asset', `only USDC (${network.token}) is settled on ${network.name}`);

  // Signature, recovered under the token's real domain: a wrong domain name in the
  // request does not fail to verify, it recovers another address.
  const signer = await checkSignature(network, shaped, signature).catch((err: unknown) => {
    throw refusal(err);
  });

  // Time, from the service's own clock.
  checked(() => checkTime(shaped, c.ports.now()));

  // Payee binding.
  if (intent.payee !== a.to) throw new Rejection('payee_authorization_mismatch', 'intent.payee must be authorization.to');
  return { body: parsed.data, network, signer, value, validAfter, validBefore, maxMinor, totalMinor };
}

/**
 * The organization's policies: tool `x402.execute`, the signer as the agent,
 * the amount in USDC cents; then the replay guard (the (signer, nonce)
 * claim), the amount guard against the internal mandate (one per
 * organization, signer, payee and resource), and the verified row. The
 * policies come from this process's folded copy first, without a read; the
 * row (the last write before money moves) is appended under the policy
 * stream's revision, so a change acknowledged anywhere before it refuses
 * the row (nothing written): the claim and the reservation are released
 * and the execution is evaluated again on a fresh read (as spends are).
 */
async function record(c: ExecCtx, v: Verified, input: unknown, approvedBy: string | null): Promise<Recorded> {
  const { ports, tenant, run } = c;
  const x = ports.x402!;
  const { authorization: a, intent } = v.body;
  const amountMinor = (v.value + ATOMIC_PER_CENT - 1n) / ATOMIC_PER_CENT;
  const key = createHash('sha256').update(`${tenant.orgId}\n${v.signer}\n${a.to}\n${intent.resource}`).digest('hex').slice(0, 32);
  const mandateId = `x402mdt_${key.slice(0, 16)}`;
  for (let attempt = 1; ; attempt++) {
    const outcome = await new PolicyEngine(ports.store, ports.now, ports.baseUrl).evaluate(
      { orgId: tenant.orgId, projectId: tenant.projectId, agentId: v.signer, toolName: 'x402.execute', toolInput: input as Record<string, unknown>, amountMinor, currency: 'USDC', approvedBy },
      run,
      { fromCache: attempt === 1 },
    );
    if (outcome.decision !== 'allowed') throw policyRefusal(outcome);
    const fauthId = newId('fauth');
    try {
      await run(nonceDecider, nonceStream(v.signer, a.nonce), { type: 'claim', signer: v.signer, nonce: a.nonce, fauthId }, { serialize: true });
    } catch (err) {
      await outcome.release();
      throw err;
    }
    try {
      if (v.network.name === 'base' && amountMinor > x.mainnetCeilingMinor) throw new Rejection('x402_mainnet_cap_exceeded', `mainnet executions are capped at ${x.mainnetCeilingMinor} cents`);
      await run(
        x402MandateDecider,
        x402MandateStream(key),
        { type: 'reserve', open: { mandateId, orgId: tenant.orgId, signer: v.signer, payee: a.to, resource: intent.resource, perTx: v.maxMinor, total: v.totalMinor }, fauthId, amount: amountMinor },
        { serialize: true },
      );
    } catch (err) {
      // Refused before the row: release the claim, so no row and no spent nonce remain.
      await run(nonceDecider, nonceStream(v.signer, a.nonce), { type: 'release', fauthId, reason: err instanceof Rejection ? err.code : 'error' }, { serialize: true });
      await outcome.release();
      throw err;
    }
    try {
      await run(fauthDecider, fauthStream(fauthId), { type: 'record', events: [verifiedEvent(c, v, { fauthId, key, mandateId, amountMinor })] }, { expectedRevision: 'no_stream', guard: outcome.guard });
      return { fauthId, key, mandateId, amountMinor };
    } catch (err) {
      if (!(err instanceof GuardFailed)) throw err;
      // The policies moved: nothing of the row was written; undo the reservation and the claim, and decide again.
      await run(x402MandateDecider, x402MandateStream(key), { type: 'release', fauthId, amount: amountMinor }, { serialize: true });
      await run(nonceDecider, nonceStream(v.signer, a.nonce), { type: 'release', fauthId, reason: 'policies_changed' }, { serialize: true });
      await outcome.release();
      if (attempt >= POLICY_ATTEMPTS) throw new Rejection('concurrency_conflict', 'the policies kept changing; retry the request', { attempts: attempt });
    }
  }
}

function verifiedEvent(c: ExecCtx, v: Verified, r: Recorded) {
  const { authorization: a } = v.body;
  return {
    type: 'x402.authorization_verified' as const,
    data: {
      foreign_authorization_id: r.fauthId,
      org_id: c.tenant.orgId,
      project_id: c.tenant.projectId,
      signer: v.signer,
      payee: a.to,
      nonce: a.nonce.toLowerCase(),
      value_atomic: v.value.toString(),
      amount_minor: r.amountMinor.toString(),
      asset: v.network.token,
      chain_id: v.network.chainId,
      network: v.network.name,
      mandate_id: r.mandateId,
      mandate_key: r.key,
      valid_after: v.validAfter.toString(),
      valid_before: v.validBefore.toString(),
      signature: v.body.signature,
      intent: v.body.intent as Record<string, unknown>,
      at: c.ports.now().toISOString(),
    },
  };
}

/** Settlement: a 200 means USDC moved; an unknown outcome keeps the row open; a failure releases the amount. */
async function settle(c: ExecCtx, v: Verified, r: Recorded): Promise<ExecutionResult> {
  const { run } = c;
  const x = c.ports.x402!;
  const { network, signer, value } = v;
  const { authorization: a, signature } = v.body;
  const { fauthId } = r;
  const at = () => c.ports.now().toISOString();
  const result = await network.settlement.settle({ from: a.from as `0x${string}`, to: a.to as `0x${string}`, value, validAfter: v.validAfter, validBefore: v.validBefore, nonce: a.nonce as `0x${string}` }, signature as `0x${string}`);
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
      status: 'executed',
      foreign_authorization_id: fauthId,
      mandate_id: r.mandateId,
      execution_id: executionId,
      signer,
      settlement: { tx_hash: result.txHash, network: network.name, money_moved: true, adapter: network.adapter },
      receipt: { id: receiptId, state: 'signed', chain: network.name },
    };
  }
  if (result.outcome === 'unknown') {
    await run(fauthDecider, fauthStream(fauthId), { type: 'record', events: [{ type: 'x402.settlement_unknown', data: { foreign_authorization_id: fauthId, tx_hash: result.txHash, detail: result.reason, at: at() } }] });
    throw new Rejection('settlement_outcome_unknown', 'a transaction was broadcast but its outcome is not known yet; the authorization stays open until the chain answers', { tx_hash: result.txHash, outcome: 'unknown', foreign_authorization_id: fauthId });
  }
  const txHash = result.outcome === 'reverted' ? result.txHash : null;
  await run(fauthDecider, fauthStream(fauthId), { type: 'record', events: [{ type: 'x402.rejected', data: { foreign_authorization_id: fauthId, reject_code: 'settlement_failed', detail: result.reason, tx_hash: txHash, at: at() } }] });
  await run(x402MandateDecider, x402MandateStream(r.key), { type: 'release', fauthId, amount: r.amountMinor }, { serialize: true });
  throw new Rejection('settlement_failed', `settlement failed: ${result.reason}`, { foreign_authorization_id: fauthId, tx_hash: txHash, money_moved: false });
}

// An approved `x402.execute` runs the held request body verbatim; the network follows its chain id.
export const x402ExecuteExecutor: ApprovalExecutor = async (a, ports, run) => {
  if (!a.project_id) throw new Rejection('invalid_transition', 'the held execution has no project');
  const chainId = (a.tool_input as { domain?: { chainId?: unknown } }).domain?.chainId;
  const environment = chainId === ports.x402?.live?.chainId ? 'live' : 'test';
  return executeAuthorization({ ports, tenant: { orgId: a.org_id, projectId: a.project_id }, environment, run }, a.tool_input, a.decided_by ?? 'approval');
};
