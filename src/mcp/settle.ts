import { mcpCallDecider, mcpCallStream, platformFee } from '../../commands/mcp.ts';
import type { Network } from '../adapters/chain/x402.ts';
import { type CommandContext, handleCommand, Rejection } from '../eventstore/handler.ts';
import type { EventStore, Position } from '../eventstore/port.ts';
import { newId } from '../ids.ts';
import { claimNonce, type Payment, releaseNonce, type Requirements, settle, settleResponse, verifyPayment } from '../x402/payment.ts';
import { X402Refusal } from '../x402/verify.ts';

// The one settlement path of a paid tool call, whichever way its payment
// arrived (x402's HTTP transport: the PAYMENT-SIGNATURE / X-PAYMENT header;
// x402's MCP transport: `_meta["x402/payment"]`): verify against the
// requirements, claim the (signer, nonce) in the facilitator's claim stream —
// so one authorization is spent once, across both transports and the
// facilitator —, settle on chain, record `mcp_call.settled` with the fee.

export type PricedCall = {
  server: { id: string; org_id: string; project_id: string; environment: 'live' | 'test'; payto_address: string; platform_fee_bps: number };
  tool: { tool_name: string; price_atomic: string };
  network: Network;
  requirements: Requirements;
};

export type SettlementDeps = { store: EventStore; waitFor(p: Position): Promise<unknown>; now(): Date };

/** The SettleResponse of x402 v2 (`PAYMENT-RESPONSE` / `_meta["x402/payment-response"]`). */
export type Settled = { callId: string; response: ReturnType<typeof settleResponse> };

/** Settled, or refused with the x402 error code (nothing moved, or the chain reverted it). */
export type SettlementOutcome = { ok: true; settled: Settled } | { ok: false; error: string };

/** Thrown when the payment was broadcast but its outcome is not known: the caller must not offer to be paid again. */
export class SettlementUnknown extends Rejection {
  constructor(readonly txHash: string) {
    super('settlement_outcome_unknown', 'the payment was broadcast but its outcome is not known yet', { tx_hash: txHash });
  }
}

export async function settleToolPayment(d: SettlementDeps, ctx: CommandContext, call: PricedCall, payment: Payment): Promise<SettlementOutcome> {
  const { server, tool, network, requirements } = call;
  const callId = newId('mcpcall');
  let verified;
  try {
    verified = await verifyPayment(network, requirements, payment, d.now());
    await claimNonce(d.store, ctx, verified, callId);
  } catch (err) {
    if (err instanceof X402Refusal) return { ok: false, error: err.code };
    throw err;
  }
  const result = await settle(network, verified);
  if (result.outcome === 'not_sent') {
    await releaseNonce(d.store, ctx, verified, callId, 'settlement_failed');
    return { ok: false, error: 'settlement_failed' };
  }
  if (result.outcome === 'reverted') return { ok: false, error: 'settlement_failed' };
  if (result.outcome === 'unknown') throw new SettlementUnknown(result.txHash);
  const price = BigInt(tool.price_atomic);
  const r = await handleCommand(
    d.store,
    mcpCallDecider,
    mcpCallStream(callId),
    {
      type: 'settled',
      data: {
        call_id: callId,
        server_id: server.id,
        org_id: server.org_id,
        project_id: server.project_id,
        tool_name: tool.tool_name,
        environment: server.environment,
        network: network.name,
        payer: verified.signer,
        pay_to: server.payto_address,
        nonce: verified.authorization.nonce.toLowerCase(),
        price_atomic: price.toString(),
        platform_fee_bps: server.platform_fee_bps,
        fee_atomic: platformFee(price, server.platform_fee_bps).toString(),
        tx_hash: result.txHash,
        x402_version: payment.version,
      },
    },
    ctx,
  );
  if (r.lastPosition) await d.waitFor(r.lastPosition);
  return { ok: true, settled: { callId, response: settleResponse(network, verified.signer, result.txHash) } };
}
