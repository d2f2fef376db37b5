import fs from 'node:fs';
import type net from 'node:net';
import path from 'node:path';

// Where the sandboxes keep what they know across restarts: DATA_DIR/sandboxes.
// The ledger remembers the partner accounts, credentials, consents and charges
// it opened at a sandbox; the sandbox must remember them too, and answer on the
// same port, or every URL and BR Code the ledger handed out dies with the
// process. Each sandbox keeps one JSON state file, rewritten whole (write to a
// temporary file, then rename: a crash leaves the old or the new state, never
// half of one) after each change; the ports they listen on are remembered in
// ports.json and taken again at the next start. A sandbox built without a home
// (the tests' in-process sandboxes) keeps everything in memory as before.

export type SandboxHome = {
  /** DATA_DIR/sandboxes. */
  dir: string;
  /** One line for the operator (a port that moved, a state file set aside). */
  note(line: string): void;
};

export function sandboxHome(dataDir: string, note: (line: string) => void): SandboxHome {
  return { dir: path.join(path.resolve(dataDir), 'sandboxes'), note };
}

/** One sandbox's state file: load at start, save after each change. */
export class StateFile<T> {
  readonly file: string;
  constructor(
    private readonly home: SandboxHome,
    name: string,
  ) {
    this.file = path.join(home.dir, `${name}.json`);
  }

  /** The saved state; undefined when none. A file that does not parse is set aside (named in one line) and the sandbox starts empty. */
  load(): T | undefined {
    let text: string;
    try {
      text = fs.readFileSync(this.file, 'utf8');
    } catch {
      return undefined;
    }
    try {
      return JSON.parse(text) as T;
    } catch {
      const aside = `${this.file}.unreadable-${Date.now()}`;
      fs.renameSync(this.file, aside);
      this.home.note(`the sandbox state file ${this.file} could not be read; it was moved to ${aside} and this sandbox starts empty`);
      return undefined;
    }
  }

  save(value: T): void {
    fs.mkdirSync(this.home.dir, { recursive: true, mode: 0o700 });
    const tmp = `${this.file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(value), { mode: 0o600 });
    fs.renameSync(tmp, this.file);
  }
}

const portsFile = (home: SandboxHome) => path.join(home.dir, 'ports.json');

function readPorts(home: SandboxHome): Record<string, number> {
  try {
    return JSON.parse(fs.readFileSync(portsFile(home), 'utf8')) as Record<string, number>;
  } catch {
    return {};
  }
}

/** The port a sandbox listened on last time (undefined the first time). */
export function rememberedPort(home: SandboxHome | undefined, name: string): number | undefined {
  if (!home) return undefined;
  const p = readPorts(home)[name];
  return typeof p === 'number' && Number.isInteger(p) && p > 0 && p < 65536 ? p : undefined;
}

export function rememberPort(home: SandboxHome, name: string, port: number): void {
  const ports = readPorts(home);
  if (ports[name] === port) return;
  ports[name] = port;
  fs.mkdirSync(home.dir, { recursive: true, mode: 0o700 });
  const tmp = `${portsFile(home)}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(ports, null, 2) + '\n');
  fs.renameSync(tmp, portsFile(home));
}

function listenOn(server: net.Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', onError);
      resolve((server.address() as net.AddressInfo).port);
    });
  });
}

/**
 * Listens on loopback: on the port this sandbox had last time when there is
 * one and it is free, else on a new one (remembered for next time), saying so
 * in one line when a remembered port was taken.
 */
export async function listenStable(server: net.Server, home: SandboxHome | undefined, name: string, what: string): Promise<number> {
  const wanted = rememberedPort(home, name);
  let port: number;
  if (wanted === undefined) port = await listenOn(server, 0);
  else {
    try {
      port = await listenOn(server, wanted);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
      port = await listenOn(server, 0);
      home!.note(`${what}: port ${wanted} (used last time) is taken by another process, listening on ${port} instead: URLs and BR Codes handed out before this start point at the old port`);
      // The remembered port stays remembered: the next start takes it again once it is free.
      return port;
    }
  }
  if (home) rememberPort(home, name, port);
  return port;
}
