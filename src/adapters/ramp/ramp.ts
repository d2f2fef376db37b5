// The ramp that moves value between a consumer's currency slots (issue 58):
// a fiat ⇄ stablecoin trade at the ramp's quoted rate, never a synthetic FX.
// The sandbox ramp (test keys) quotes fixed, deterministic rates between the
// real currency pairs a Brazilian ramp trades; no live ramp is wired, so live
// keys answer `not_wired`. A pair the ramp does not trade has no route.

/** A quote: the destination is credited floor(amount × numerator / denominator) minor units. */
export type RampQuote = { engine: string; numerator: bigint; denominator: bigint };

export interface Ramp {
  readonly engine: string;
  /** The rate of a pair, or undefined when the ramp has no route between them. */
  quote(from: string, to: string): RampQuote | undefined;
}

/** Sandbox rates in minor units (BRL, BRLA and USDC all count cents): 1 USDC = 5 BRL; BRLA is BRL on chain, 1:1. */
const SANDBOX_RATES: Record<string, [bigint, bigint]> = {
  'BRL>USDC': [1n, 5n],
  'USDC>BRL': [5n, 1n],
  'BRLA>USDC': [1n, 5n],
  'USDC>BRLA': [5n, 1n],
  'BRL>BRLA': [1n, 1n],
  'BRLA>BRL': [1n, 1n],
};

export const sandboxRamp: Ramp = {
  engine: 'sandbox-ramp',
  quote(from, to) {
    const r = SANDBOX_RATES[`${from}>${to}`];
    return r ? { engine: this.engine, numerator: r[0], denominator: r[1] } : undefined;
  },
};

/** The ramp of an environment: the sandbox for test keys; none for live keys (not wired). */
export const rampFor = (environment: 'live' | 'test'): Ramp | null => (environment === 'test' ? sandboxRamp : null);

/** The routes the sandbox ramp trades, for a refusal's message. */
export const SANDBOX_ROUTES = Object.keys(SANDBOX_RATES).map((k) => k.replace('>', '→'));
