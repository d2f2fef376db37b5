import { z } from 'zod';
import { type PixAccount, type PixAccountState, pixAccountDecider, pixAccountStream } from '../../commands/pix.ts';
import { maskAccount } from '../../commands/pix-format.ts';
import { loadState } from '../eventstore/handler.ts';
import { PspError, type Psp } from '../adapters/psp/port.ts';
import type { ApiKeyAuth } from './auth.ts';
import { ApiError } from './errors.ts';
import { readConsumer } from './consumers.ts';
import type { AppDeps } from './route.ts';

// What the Pix routes share: the consumer's partner account, the PSP that
// holds it, and how PSP failures become the spec's answers.

export const ConsumerParams = z.object({ consumerId: z.string().min(1).max(200) });

export const consumerNotFound = () => new ApiError(404, 'not_found', 'consumer not found');
export const noPartnerAccount = () => new ApiError(422, 'no_partner_account', 'the consumer has no partner account at a PSP; open one first', { remediation: 'POST /v1/consumers/{consumerId}/pix/partner-account' });

/** The PSP of an account (`sandbox` or `live`); a live PSP without configuration says so. */
export function pspOf(deps: AppDeps, psp: 'sandbox' | 'live'): Psp {
  if (psp === 'live') return deps.pix.live;
  if (!deps.pix.sandbox) throw new ApiError(501, 'not_wired', 'the sandbox PSP is not running (SANDBOX_PSP=off)');
  return deps.pix.sandbox;
}

/** The PSP a credential's environment uses: test keys the sandbox, live keys the live PSP. */
export const pspNameFor = (auth: ApiKeyAuth): 'sandbox' | 'live' => (auth.environment === 'test' ? 'sandbox' : 'live');

/** The consumer (404 when absent or another tenant's) and its partner account (422 when none). */
export async function loadAccount(deps: AppDeps, auth: ApiKeyAuth, consumerId: string): Promise<PixAccount> {
  if (!(await readConsumer(deps, auth, consumerId))) throw consumerNotFound();
  const { state } = await loadState<PixAccountState>(deps.store, pixAccountStream(consumerId), pixAccountDecider);
  if (state.status === 'none' || state.orgId !== auth.orgId || state.projectId !== auth.projectId) throw noPartnerAccount();
  return state;
}

export const accountMasked = (a: PixAccount) => maskAccount(a.pspAccount);

/** A PSP that is not configured is the spec's 501 `not_wired`; anything else is the caller's to map. */
export function notConfigured(err: unknown): void {
  if (err instanceof PspError && err.reason === 'not_configured') throw new ApiError(501, 'not_wired', err.message);
}

export { PspError };
