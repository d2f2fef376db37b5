// The shape every timed reactor shares: a pass on an interval, never two at
// once, a `tick()` tests call directly, and a `stop()` that waits for the pass
// in flight.

export class Periodic {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;

  constructor(
    private readonly pass: () => Promise<number>,
    private readonly intervalMs: number,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.tick().catch(() => {}), this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running?.catch(() => {});
  }

  /** One pass now (or the one in flight); answers how many things it moved. */
  tick(): Promise<number> {
    this.running ??= this.pass().finally(() => (this.running = undefined));
    return this.running;
  }
}

/** A reactor that runs `pass()` on an interval: start, stop, and `tick()` for one pass now. */
export abstract class PeriodicReactor {
  private readonly periodic: Periodic;

  constructor(intervalMs: number) {
    this.periodic = new Periodic(() => this.pass(), intervalMs);
  }

  start(): void | Promise<void> {
    this.periodic.start();
  }

  stop(): Promise<void> {
    return this.periodic.stop();
  }

  /** One pass now (or the one in flight): answers how many things it moved. */
  tick(): Promise<number> {
    return this.periodic.tick();
  }

  protected abstract pass(): Promise<number>;
}
