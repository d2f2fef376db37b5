import { nonceDecider, nonceStream } from '../../commands/x402.ts';
import type { Network } from '../adapters/chain/x402.ts';
import type { SettlementResult } from '../adapters/chain/settlement.ts';
import { type CommandContext, handleCommand, Rejection } from '../eventstore/handler.ts';
import type { EventStore } from '../eventstore/port.ts';
import { type CheckedAuthorization, checkShape, checkSignature, checkTime, X402Refusal } from './verify.ts';

// x402 as a resource server speaks it (the paying MCP gateway): the payment
// requirements of a 402 (v2 `PAYMENT-REQUIRED`, with the v1 body for v1
// clients), reading a `PAYMENT-SIGNATURE` (v2) or `X-PAYMENT` (v1) header, and
// verifying + settling it through the facilitator path: the shared
// verification steps, the facilitator's (signer, nonce) claim stream — so one
// authorization is spent once across the facilitator and the gateway — and
// settlement on the network's chain.

export const PAYMENT_MAX_TIMEOUT_SECONDS = 300;
/** CAIP-2 ids of the networks (x402 v2 names networks this way; v1 used the short names). */
export const caip2 = (n: Network) => `eip155:${n.chainId}`;

export type Requirements = { scheme: 'exact'; network: string; amount: string; asset: string; payTo: string; maxTimeoutSeconds: number; extra: { name: string; version: string } };

export function requirementsFor(network: Network, payTo: string, amountAtomic: bigint): Requirements {
  return { scheme: 'exact', network: caip2(network), amount: amountAtomic.toString(), asset: network.token, payTo, maxTimeoutSeconds: PAYMENT_MAX_TIMEOUT_SECONDS, extra: { name: network.domainName, version: network.domainVersion } };
}

/** The v2 PaymentRequired object (base64 JSON in `PAYMENT-REQUIRED`). */
export const paymentRequiredV2 = (req: Requirements, resource: { url: string; description: string }, error: string) => ({
  x402Version: 2,
  error,
  resource: { ...resource, mimeType: 'application/json' },
  accepts: [req],
});

/** The v1 PaymentRequired body (network by its short name, e.g. `base-sepolia`). */
export const paymentRequiredV1 = (network: Network, req: Requirements, resource: { url: string; description: string }, error: string) => ({
  x402Version: 1,
  error,
  accepts: [{ scheme: 'exact', network: network.name, maxAmountRequired: req.amount, resource: resource.url, description: resource.description, mimeType: 'application/json', payTo: req.payTo, maxTimeoutSeconds: req.maxTimeoutSeconds, asset: req.asset, extra: req.extra }],
});

export const b64json = (o: unknown) => Buffer.from(JSON.stringify(o), 'utf8').toString('base64');

export type Payment = { version: 1 | 2; scheme: string; network: string; accepted: Record<string, unknown> | null; authorization: Record<string, unknown>; signature: string };

/** The payment a request carries in its HTTP headers (`PAYMENT-SIGNATURE`, else `X-PAYMENT`), or null; an undecodable header is refused. */
export function readPayment(headers: Record<string, string | string[] | undefined>): Payment | null {
  const v2 = headers['payment-signature'];
  const v1 = headers['x-payment'];
  const raw = typeof v2 === 'string' ? v2 : typeof v1 === 'string' ? v1 : undefined;
  if (raw === undefined) return null;
  let obj: unknown;
  try {
    if (raw.length > 16_384 || !/^[A-Za-z0-9+/=_-]+$/.test(raw.trim())) throw new Error('not base64');
    obj = JSON.parse(Buffer.from(raw.trim(), 'base64').toString('utf8'));
  } catch {
    throw new X402Refusal(400, 'invalid_payment', 'the payment header is not base64 JSON');
  }
  return paymentOf(obj);
}

/**
 * A PaymentPayload object (the decoded header, or MCP's `_meta["x402/payment"]`,
 * which carries the same object unencoded) read into a Payment; anything else is refused.
 */
export function paymentOf(obj: unknown): Payment {
  if (!obj || typeof obj !== 'object' || Array.isArray(obj)) throw new X402Refusal(400, 'invalid_payment', 'the payment is not a PaymentPayload object');
  const o = obj as Record<string, unknown>;
  const payload = o.payload as { authorization?: Record<string, unknown>; signature?: unknown } | undefined;
  if (!payload || typeof payload !== 'object' || !payload.authorization || typeof payload.authorization !== 'object' || typeof payload.signature !== 'string') throw new X402Refusal(400, 'invalid_payment', 'the payment has no payload.authorization and payload.signature');
  if (o.x402Version === 2) {
    const accepted = (o.accepted && typeof o.accepted === 'object' ? o.accepted : null) as Record<string, unknown> | null;
    return { version: 2, scheme: String(accepted?.scheme ?? ''), network: String(accepted?.network ?? ''), accepted, authorization: payload.authorization, signature: payload.signature };
  }
  if (o.x402Version === 1) return { version: 1, scheme: String(o.scheme ?? ''), network: String(o.network ?? ''), accepted: null, authorization: payload.authorization, signature: payload.signature };
  throw new X402Refusal(400, 'invalid_payment', 'unsupported x402Version');
}

export type VerifiedPayment = { signer: string; authorization: CheckedAuthorization; signature: string };

/** Every check before money moves, in the facilitator's order, plus the match with our requirements. */
export async function verifyPayment(network: Network, req: Requirements, p: Payment, now: Date): Promise<VerifiedPayment> {
  if (p.scheme !== 'exact') throw new X402Refusal(402, 'unsupported_scheme', 'only the exact scheme is accepted');
  if (p.network !== (p.version === 2 ? caip2(network) : network.name)) throw new X402Refusal(402, 'network_mismatch', `payments settle on ${network.name} (${caip2(network)})`);
  const a = checkShape(p.authorization as never);
  if (a.to !== req.payTo) throw new X402Refusal(402, 'payee_authorization_mismatch', 'authorization.to must be the server’s payTo');
  if (a.value !== BigInt(req.amount)) throw new X402Refusal(402, 'amount_mismatch', `the price is ${req.amount} atomic units`, { amount: req.amount });
  const signer = await checkSignature(network, a, p.signature);
  checkTime(a, now);
  return { signer, authorization: a, signature: p.signature };
}

/** Claims the (signer, nonce) in the facilitator's claim stream; a second use is refused. */
export async function claimNonce(store: EventStore, ctx: CommandContext, v: VerifiedPayment, holderId: string): Promise<void> {
  try {
    await handleCommand(store, nonceDecider, nonceStream(v.signer, v.authorization.nonce), { type: 'claim', signer: v.signer, nonce: v.authorization.nonce, fauthId: holderId }, ctx, { serialize: true });
  } catch (err) {
    if (err instanceof Rejection && err.code === 'authorization_already_used') throw new X402Refusal(402, 'authorization_already_used', 'this payment authorization was already used', err.details);
    throw err;
  }
}

export async function releaseNonce(store: EventStore, ctx: CommandContext, v: VerifiedPayment, holderId: string, reason: string): Promise<void> {
  await handleCommand(store, nonceDecider, nonceStream(v.signer, v.authorization.nonce), { type: 'release', fauthId: holderId, reason }, ctx, { serialize: true });
}

export function settle(network: Network, v: VerifiedPayment): Promise<SettlementResult> {
  return network.settlement.settle(v.authorization, v.signature as `0x${string}`);
}

/** The v2 SettleResponse (base64 JSON in `PAYMENT-RESPONSE`). */
export const settleResponse = (network: Network, payer: string, txHash: string) => ({ success: true, payer, transaction: txHash, network: caip2(network) });
