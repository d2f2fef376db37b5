import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify';

// What every request pays for being logged and counted, kept to what it uses.
//
// - A request's logger is pino's child with the request id bound; making it
//   costs a few microseconds (an object and the bindings' text) whether or not
//   a line is ever written, and at `warn` most requests write none. The child
//   here is made the first time a line at an enabled level is written, with
//   the same bindings, so every line reads exactly as before.
// - fastify's log controller sees each answered request once, when its
//   response has finished (or failed): the place where fastify writes its
//   "request completed" line. What counts requests observes it there, instead
//   of running a hook of its own on every response.

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
type Pino = FastifyBaseLogger & { isLevelEnabled(level: string): boolean };

class RequestLogger {
  private real: FastifyBaseLogger | undefined;
  constructor(
    private readonly parent: Pino,
    private readonly bindings: Record<string, unknown>,
    private readonly opts: Record<string, unknown>,
  ) {}

  private get logger(): FastifyBaseLogger {
    return (this.real ??= this.parent.child(this.bindings, this.opts));
  }

  get level(): string {
    return this.real ? this.real.level : this.parent.level;
  }

  private write(level: Level, args: unknown[]): void {
    // A level the request's options change (a route's logLevel) is decided by the child itself.
    if (this.real !== undefined || this.opts.level !== undefined || this.parent.isLevelEnabled(level)) (this.logger[level] as (...a: unknown[]) => void)(...args);
  }

  fatal(...args: unknown[]): void {
    this.write('fatal', args);
  }
  error(...args: unknown[]): void {
    this.write('error', args);
  }
  warn(...args: unknown[]): void {
    this.write('warn', args);
  }
  info(...args: unknown[]): void {
    this.write('info', args);
  }
  debug(...args: unknown[]): void {
    this.write('debug', args);
  }
  trace(...args: unknown[]): void {
    this.write('trace', args);
  }
  silent(): void {}
  child(bindings: Record<string, unknown>, opts?: Record<string, unknown>): FastifyBaseLogger {
    return this.logger.child(bindings, opts);
  }
  isLevelEnabled(level: string): boolean {
    return this.real ? (this.real as Pino).isLevelEnabled(level) : this.parent.isLevelEnabled(level);
  }
}

/** fastify's `childLoggerFactory`: the request's child logger, made when it first writes. */
export function requestChildLogger(logger: FastifyBaseLogger, bindings: Record<string, unknown>, opts: object): FastifyBaseLogger {
  return new RequestLogger(logger as Pino, bindings, opts as Record<string, unknown>) as unknown as FastifyBaseLogger;
}

export type CompletedObserver = (request: FastifyRequest, reply: FastifyReply) => void;

/** fastify's log controller, telling observers of every answered request (before its "request completed" line). */
export class RequestLog extends LogController {
  private readonly observers: CompletedObserver[] = [];

  observe(fn: CompletedObserver): void {
    this.observers.push(fn);
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply, metadata?: Record<string, unknown>): void {
    for (const o of this.observers) o(request, reply);
    super.requestCompleted(error, request, reply, metadata);
  }
}
