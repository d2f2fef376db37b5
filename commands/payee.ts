import { keyTypeOf } from './pix-format.ts';

// What a spend's payee is, and which currency slot of a mandate it draws
// (issue 58: the product's `spend {amount_minor, payee, agent_id}`): a Pix key
// is paid in reais, an EVM address or an x402 resource URL in a stablecoin on
// chain. No FX: a payee whose currency the mandate has no slot for is refused
// (`currency_not_authorized`), never converted.

export type PayeeKind = 'pix' | 'evm' | 'url' | 'other';

const EVM = /^0x[0-9a-fA-F]{40}$/;

export function payeeKind(payee: string): PayeeKind {
  const p = payee.trim();
  if (EVM.test(p)) return 'evm';
  if (/^https?:\/\//i.test(p)) return 'url';
  if (keyTypeOf(p) !== null) return 'pix';
  return 'other';
}

/** The currencies a payee kind is paid in, most preferred first. */
export const PAYEE_CURRENCIES: Record<Exclude<PayeeKind, 'other'>, readonly string[]> = {
  pix: ['BRL'],
  evm: ['USDC', 'BRLA'],
  url: ['USDC'],
};

/**
 * The currency a payee draws from these slots (in the mandate's order): the
 * first slot in one of its kind's currencies; else the kind's first currency,
 * which no slot holds (the spend is then refused `currency_not_authorized`).
 * A payee of no known kind draws the only slot; with several, null (the
 * caller must name the currency).
 */
export function payeeCurrency(slots: readonly { currency: string }[], payee: string): string | null {
  const kind = payeeKind(payee);
  if (kind === 'other') return slots.length === 1 ? slots[0]!.currency : null;
  const wanted = PAYEE_CURRENCIES[kind];
  return slots.find((s) => wanted.includes(s.currency))?.currency ?? wanted[0]!;
}
