import { RATE_LIMIT_BURST, RATE_LIMIT_PER_SECOND } from '../limits.ts';
import { RawHttpError } from './errors.ts';

// Per-credential token buckets, in memory (an operational counter, not a
// business fact). A refusal answers 429 {error: "rate_limited", ...} with the
// limit fields at the top level (spec Part 7) and Retry-After.

export type RateLimitConfig = { burst: number; perSecond: number };
export const defaultRateLimit: RateLimitConfig = { burst: RATE_LIMIT_BURST, perSecond: RATE_LIMIT_PER_SECOND };

export class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  constructor(
    private readonly cfg: RateLimitConfig,
    private readonly now: () => number = Date.now,
  ) {}

  take(id: string): void {
    const t = this.now();
    const b = this.buckets.get(id) ?? { tokens: this.cfg.burst, at: t };
    b.tokens = Math.min(this.cfg.burst, b.tokens + ((t - b.at) / 1000) * this.cfg.perSecond);
    b.at = t;
    if (b.tokens < 1) {
      const retry = Math.max(1, Math.ceil((1 - b.tokens) / this.cfg.perSecond));
      this.buckets.set(id, b);
      throw new RawHttpError(
        429,
        { error: 'rate_limited', message: 'too many requests for this API key', limit: this.cfg.burst, refill_per_second: this.cfg.perSecond, remaining: 0, retry_after_seconds: retry },
        { 'retry-after': String(retry) },
      );
    }
    b.tokens -= 1;
    if (this.buckets.size > 100_000) this.buckets.clear();
    this.buckets.set(id, b);
  }
}
