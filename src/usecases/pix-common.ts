import { type PixAccount, type PixAccountState, pixAccountDecider, pixAccountStream } from '../../commands/pix.ts';
import { maskAccount } from '../../commands/pix-format.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import { PspError, type Psp } from '../adapters/psp/port.ts';
import type { Ports, Tenant } from './context.ts';
import { consumerNotFound, readConsumer } from './consumers.ts';

// What the Pix use cases share: the consumer's partner account, the PSP that
// holds it, and how PSP failures become the spec's rejections.

export { consumerNotFound };
export const noPartnerAccount = () => new Rejection('no_partner_account', 'the consumer has no partner account at a PSP; open one first', { remediation: 'POST /v1/consumers/{consumerId}/pix/partner-account' });

/** The PSP of an account (`sandbox` or `live`); a live PSP without configuration says so. */
export function pspOf(ports: Pick<Ports, 'pix'>, psp: 'sandbox' | 'live'): Psp {
  if (psp === 'live') return ports.pix.live;
  if (!ports.pix.sandbox) throw new Rejection('not_wired', 'the sandbox PSP is not running (SANDBOX_PSP=off)');
  return ports.pix.sandbox;
}

/** The PSP a credential's environment uses: test keys the sandbox, live keys the live PSP. */
export const pspNameFor = (credential: { environment: 'live' | 'test' }): 'sandbox' | 'live' => (credential.environment === 'test' ? 'sandbox' : 'live');

/** The consumer (not_found when absent or another tenant's) and its partner account (no_partner_account when none). */
export async function loadAccount(ports: Pick<Ports, 'db' | 'store'>, tenant: Tenant, consumerId: string): Promise<PixAccount> {
  if (!(await readConsumer(ports, tenant, consumerId))) throw consumerNotFound();
  const { state } = await loadState<PixAccountState>(ports.store, pixAccountStream(consumerId), pixAccountDecider);
  if (state.status === 'none' || state.orgId !== tenant.orgId || state.projectId !== tenant.projectId) throw noPartnerAccount();
  return state;
}

export const accountMasked = (a: PixAccount) => maskAccount(a.pspAccount);

/** A PSP that is not configured is the spec's 501 `not_wired`; anything else is the caller's to map. */
export function notConfigured(err: unknown): void {
  if (err instanceof PspError && err.reason === 'not_configured') throw new Rejection('not_wired', err.message);
}

export { PspError };
