import { EventEmitter } from 'node:events';
import type { Worker } from 'node:worker_threads';
import { countPass } from '../metrics.ts';
import { moduleWorker } from './worker-boot.ts';

// Continuous verification re-reads and re-hashes every sealed entry: as much
// work as sealing it, and none of it on any request's path. It runs on a
// worker thread with its own connections, so it uses a core the service's
// thread is not using instead of delaying requests (docs/performance.md, fifth
// round). A clock injected for tests cannot cross threads: with one, the
// verifier runs in the service's thread as before (src/readside.ts).

export type VerifierThreadSpec = {
  dbUrl: string;
  /** The EventStoreDB connection string when the log lives there. */
  esdbUrl: string | undefined;
  keyName: string;
  publicKey: Uint8Array;
  origin: string;
};

export class VerifierThread {
  private constructor(
    private readonly worker: Worker,
    private readonly exited: Promise<void>,
    private readonly said: EventEmitter,
  ) {}

  static async start(spec: VerifierThreadSpec): Promise<VerifierThread> {
    const worker = moduleWorker('verifier-worker', spec);
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    // Its messages: 'started', then each pass's result ({ pass }), counted here for /metrics; 'stopped' when told to stop.
    const said = new EventEmitter();
    worker.on('message', (m: unknown) => {
      if (m === 'started' || m === 'stopped') said.emit(m);
      else if (m && typeof m === 'object' && ((m as { pass?: unknown }).pass === 'ok' || (m as { pass?: unknown }).pass === 'broken')) countPass((m as { pass: 'ok' | 'broken' }).pass);
    });
    try {
      await new Promise<void>((resolve, reject) => {
        said.once('started', () => resolve());
        worker.once('error', reject);
        void exited.then(() => reject(new Error('the verifier thread exited before starting')));
      });
    } catch (err) {
      await worker.terminate();
      throw err;
    }
    // Once started, a failure of the thread must not end the service: verification
    // health shows the verifier falling behind (last_checked_at stops moving).
    worker.removeAllListeners('error');
    worker.on('error', () => {});
    worker.unref();
    return new VerifierThread(worker, exited, said);
  }

  /** Stops the schedule after the pass under way, closes the thread's connections, ends it. */
  async stop(): Promise<void> {
    const stopped = new Promise<void>((resolve) => this.said.once('stopped', () => resolve()));
    this.worker.postMessage('stop');
    await Promise.race([stopped, this.exited]);
    await this.worker.terminate();
  }
}
