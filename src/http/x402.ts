import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { receiptJwks } from '../adapters/chain/x402.ts';
import { executeAuthorization } from '../usecases/x402.ts';
import { getForeignAuthorization, mintTestUsdc } from '../usecases/x402-facilitator.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';
import { IdParam, Timestamp } from './kernel/schemas.ts';

// The x402 facilitator (spec 4.15): the execution is a use case
// (src/usecases/x402.ts); a 200 means USDC moved on chain. The read and the
// sandbox faucet: src/usecases/x402-facilitator.ts.

const FauthView = z
  .object({
    id: z.string(),
    kind: z.literal('x402').describe('The protocol of the authorization: `x402` (the only one written).'),
    signer: z.string(),
    payee: z.string().describe('The address paid, checksummed; it must be the mandate\'s bound payee.'),
    nonce: z.string(),
    value_atomic: z.string(),
    amount_minor: z.number().int(),
    asset: z.string().nullable(),
    chain_id: z.number().int().nullable(),
    network: z.string().nullable(),
    status: z.enum(['verified', 'executed', 'rejected']).describe('`verified` (the signature, payee, replay and amount checks passed), then `executed` (settled, receipt sealed) or `rejected` (`reject_code` says why).'),
    mandate_id: z.string(),
    execution_id: z.string().nullable(),
    receipt_id: z.string().nullable(),
    settlement_tx: z.string().nullable().describe('The settlement transaction hash on chain; null until executed.'),
    reject_code: z.string().nullable().describe('Why it was rejected, as a stable code; null unless rejected.'),
    created_at: Timestamp,
  })
  .meta({ id: 'ForeignAuthorization' });

export async function x402Routes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  executionRoutes(app, deps);
  executionReadAndFaucetRoutes(app, deps);
}

/** The receipt keys and the execution. */
function executionRoutes(app: FastifyInstance, deps: AppDeps): void {
  defineRoute(app, deps, {
    method: 'GET',
    url: '/.well-known/receipt-keys.json',
    operationId: 'receiptKeys',
    summary: 'The public keys that sign x402 receipts, as a JWKS (OKP / Ed25519)',
    tags: ['facilitator'],
    auth: 'open',
    responses: { 200: z.object({ keys: z.array(z.record(z.string(), z.string())).describe('The public keys that sign receipts, as a JSON Web Key Set (RFC 7517); empty when x402 is not configured.') }) },
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
        status: z.literal('executed').describe('`executed`: the transfer settled and the receipt is sealed.'),
        foreign_authorization_id: z.string().describe('The foreign authorization recorded (`fauth_` prefix).'),
        mandate_id: z.string(),
        execution_id: z.string(),
        signer: z.string(),
        settlement: z.object({ tx_hash: z.string(), network: z.string(), money_moved: z.literal(true), adapter: z.string().describe('The settlement adapter that moved the money (the chain it spoke to).') }).describe('How the money moved.'),
        receipt: z.object({ id: z.string(), state: z.string().describe('`signed`: the receipt is signed with a key of `/.well-known/receipt-keys.json`.'), chain: z.string().describe('The network the receipt is for.') }).describe('The signed receipt of the settlement.'),
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
      [403, 'policy_denied'],
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
    async handler({ auth, deps, run, body }) {
      const tenant = { orgId: auth.orgId, projectId: auth.projectId };
      return { status: 200, body: await executeAuthorization({ ports: deps, tenant, environment: auth.environment, run }, body, null) };
    },
  });
}

/** An execution read back, and the sandbox faucet. */
function executionReadAndFaucetRoutes(app: FastifyInstance, deps: AppDeps): void {
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
      return { status: 200, body: await getForeignAuthorization(deps, auth.orgId, params.id) };
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
      return { status: 200, body: await mintTestUsdc(deps, auth.environment, body.address, body.value_atomic) };
    },
  });
}
