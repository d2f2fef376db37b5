import { type ChildProcess, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { freeLoopbackPort } from '../../postgres/embedded.ts';
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

export type LocalChain = { rpcUrl: string; chainId: number; token: string; stop(): Promise<void> };

export async function startLocalChain(opts: { chainId?: number } = {}): Promise<LocalChain> {
  const chainId = opts.chainId ?? BASE_SEPOLIA_CHAIN_ID;
  const port = await freeLoopbackPort();
  const child: ChildProcess = spawn(anvilBinary(), ['--host', '127.0.0.1', '--port', String(port), '--chain-id', String(chainId), '--silent'], { stdio: 'ignore' });
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
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}
