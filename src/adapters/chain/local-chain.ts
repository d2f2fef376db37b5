import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { freeLoopbackPort } from '../../postgres/embedded.ts';
import { rememberedPort, rememberPort, type SandboxHome } from '../sandbox-home.ts';
import token from './test-usdc.json' with { type: 'json' };

// A real local EVM for test settlements: anvil from the @foundry-rs/anvil npm
// package (its platform package carries the binary), with our EIP-3009 test
// token placed at the real Base Sepolia USDC address, so production and test
// configuration differ only in the RPC URL.

export const BASE_SEPOLIA_CHAIN_ID = 84532;
export const BASE_SEPOLIA_USDC = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
/** anvil's first well-known development account: the sandbox facilitator and token minter. */
export const SANDBOX_FACILITATOR_KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
export const SANDBOX_FACILITATOR_ADDRESS = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';

const PLATFORM: Record<string, string> = {
  'linux-x64': '@foundry-rs/anvil-linux-amd64',
  'linux-arm64': '@foundry-rs/anvil-linux-arm64',
  'darwin-x64': '@foundry-rs/anvil-darwin-amd64',
  'darwin-arm64': '@foundry-rs/anvil-darwin-arm64',
};

export function anvilBinary(): string {
  const pkg = PLATFORM[`${process.platform}-${process.arch}`];
  if (!pkg) throw new Error(`no anvil package for ${process.platform}-${process.arch}`);
  const require = createRequire(import.meta.url);
  return path.join(path.dirname(require.resolve(`${pkg}/package.json`)), 'bin', 'anvil');
}

async function rpc(url: string, method: string, params: unknown[]): Promise<unknown> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  const j = (await res.json()) as { result?: unknown; error?: { message: string } };
  if (j.error) throw new Error(`${method}: ${j.error.message}`);
  return j.result;
}

export type LocalChain = { rpcUrl: string; chainId: number; token: string; stateFile: string | undefined; stop(): Promise<void> };

/** How often anvil writes its state file while running (it also writes it when stopped). */
const STATE_INTERVAL_S = 5;

const portFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen({ host: '127.0.0.1', port, exclusive: true }, () => s.close(() => resolve(true)));
  });

const children = new Set<ChildProcess>();
// If this process exits without stopping its chain (a crash), stop it too: anvil writes its state as it exits.
process.once('exit', () => {
  for (const c of children) c.kill('SIGTERM');
});

/**
 * Starts anvil. With a home (DATA_DIR/sandboxes) the chain keeps its state in
 * chain-state.json there (loaded at start, written every few seconds and at
 * stop) and listens on the port it had last time when free.
 */
export async function startLocalChain(opts: { chainId?: number; home?: SandboxHome } = {}): Promise<LocalChain> {
  const chainId = opts.chainId ?? BASE_SEPOLIA_CHAIN_ID;
  const wanted = rememberedPort(opts.home, 'chain');
  const port = wanted !== undefined && (await portFree(wanted)) ? wanted : await freeLoopbackPort();
  if (wanted !== undefined && port !== wanted) opts.home!.note(`the local chain: port ${wanted} (used last time) is taken by another process, listening on ${port} instead`);
  const stateFile = opts.home ? path.join(opts.home.dir, 'chain-state.json') : undefined;
  if (opts.home) {
    await mkdir(opts.home.dir, { recursive: true, mode: 0o700 });
    if (wanted === undefined) rememberPort(opts.home, 'chain', port);
  }
  const state = stateFile ? ['--state', stateFile, '--state-interval', String(STATE_INTERVAL_S)] : [];
  const child: ChildProcess = spawn(anvilBinary(), ['--host', '127.0.0.1', '--port', String(port), '--chain-id', String(chainId), '--silent', ...state], { stdio: 'ignore' });
  children.add(child);
  child.once('exit', () => children.delete(child));
  const rpcUrl = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      await rpc(rpcUrl, 'eth_chainId', []);
      break;
    } catch {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error('anvil did not start');
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  await rpc(rpcUrl, 'anvil_setCode', [BASE_SEPOLIA_USDC, token.deployedBytecode]);
  await rpc(rpcUrl, 'anvil_setStorageAt', [BASE_SEPOLIA_USDC, '0x0', `0x${SANDBOX_FACILITATOR_ADDRESS.slice(2).toLowerCase().padStart(64, '0')}`]);
  return {
    rpcUrl,
    chainId,
    token: BASE_SEPOLIA_USDC,
    stateFile,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}
