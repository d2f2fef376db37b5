import type { Address, Hex } from 'viem';
import token from './test-usdc.json' with { type: 'json' };
import { x402Settlements } from '../../metrics.ts';
import type { ChainHead, NonceGate } from './nonces.ts';

// Settlement of EIP-3009 authorizations through any EVM RPC endpoint: the local
// chain in the sandbox, Base Sepolia or Base in production. The only file
// (with the signature checks) that imports viem, on first use (~0.4 s of CPU
// that a process which never settles does not pay).

export type Authorization = { from: Address; to: Address; value: bigint; validAfter: bigint; validBefore: bigint; nonce: Hex };

export type SettlementResult =
  | { outcome: 'settled'; txHash: Hex; blockNumber: bigint }
  | { outcome: 'reverted'; txHash: Hex; reason: string }
  | { outcome: 'not_sent'; reason: string }
  | { outcome: 'unknown'; txHash: Hex; reason: string };

export type SettlementConfig = {
  rpcUrl: string;
  chainId: number;
  token: Address;
  facilitatorKey: Hex;
  receiptTimeoutMs?: number;
  /** One sender per facilitator account across instances, with the nonce it must use (nonces.ts); without it, this process alone sends for the account. */
  nonces?: NonceGate;
};

const abi = token.abi;
const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

async function clientsOf(cfg: SettlementConfig) {
  const [{ createPublicClient, createWalletClient, http, parseSignature }, { privateKeyToAccount }] = await Promise.all([import('viem'), import('viem/accounts')]);
  const account = privateKeyToAccount(cfg.facilitatorKey);
  const chain = { id: cfg.chainId, name: `chain-${cfg.chainId}`, nativeCurrency: { name: 'ETH', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [cfg.rpcUrl] } } } as const;
  const wallet = createWalletClient({ account, chain, transport: http(cfg.rpcUrl, { retryCount: 0 }) });
  const reader = createPublicClient({ chain, transport: http(cfg.rpcUrl, { retryCount: 0 }) });
  return { account, wallet, reader, parseSignature };
}

export class EvmSettlement {
  /** The facilitator's account and the clients, made on first use (one promise: concurrent first calls share it). */
  private made: ReturnType<typeof clientsOf> | undefined;
  /** One facilitator account sends one transaction at a time: account nonces stay in order. */
  private sending: Promise<unknown> = Promise.resolve();

  constructor(private readonly cfg: SettlementConfig) {
    // A key viem would refuse is refused here, at start-up, as before the clients were made lazily.
    const ok = /^0x[0-9a-fA-F]{64}$/.test(cfg.facilitatorKey) && BigInt(cfg.facilitatorKey) > 0n && BigInt(cfg.facilitatorKey) < SECP256K1_N;
    if (!ok) throw new Error('the facilitator key is not a secp256k1 private key (32 bytes of hex, 0 < key < n)');
  }

  private clients() {
    return (this.made ??= clientsOf(this.cfg));
  }

  /** The RPC endpoint this adapter sends through. */
  get rpcUrl(): string {
    return this.cfg.rpcUrl;
  }

  /** Sends transferWithAuthorization and waits for its receipt; an unknown outcome is never reported as a failure. */
  async settle(a: Authorization, signature: Hex): Promise<SettlementResult> {
    const result = await this.settleOnce(a, signature);
    x402Settlements.inc({ outcome: result.outcome });
    return result;
  }

  private async settleOnce(a: Authorization, signature: Hex): Promise<SettlementResult> {
    const { wallet, reader, account, parseSignature } = await this.clients();
    const { r, s, v, yParity } = parseSignature(signature);
    const vv = Number(v ?? BigInt(27 + (yParity ?? 0)));
    let txHash: Hex;
    try {
      txHash = await this.send((nonce) =>
        wallet.writeContract({
          address: this.cfg.token,
          abi,
          functionName: 'transferWithAuthorization',
          args: [a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce, vv, r, s],
          chain: wallet.chain,
          account,
          ...(nonce === undefined ? {} : { nonce }),
        }),
      );
    } catch (err) {
      // Simulation or submission refused: nothing was broadcast.
      return { outcome: 'not_sent', reason: (err as { shortMessage?: string }).shortMessage ?? (err as Error).message };
    }
    try {
      const receipt = await reader.waitForTransactionReceipt({ hash: txHash, timeout: this.cfg.receiptTimeoutMs ?? 30_000 });
      if (receipt.status === 'success') return { outcome: 'settled', txHash, blockNumber: receipt.blockNumber };
      return { outcome: 'reverted', txHash, reason: 'the transfer reverted' };
    } catch (err) {
      return { outcome: 'unknown', txHash, reason: (err as Error).message };
    }
  }

  /** One send at a time in this process; across instances, under the nonce gate when there is one. */
  private send<T>(fn: (nonce: number | undefined) => Promise<T>): Promise<T> {
    const gate = this.cfg.nonces;
    const run = this.sending.then(async () => {
      if (!gate) return fn(undefined);
      const { reader, account } = await this.clients();
      const pending = () => reader.getTransactionCount({ address: account.address, blockTag: 'pending' });
      return gate(this.cfg.chainId, account.address, { pending, head: () => this.head() }, fn);
    });
    this.sending = run.catch(() => {});
    return run;
  }

  /** The chain's genesis hash and latest block number (the nonce gate notices a chain that went backwards). */
  async head(): Promise<ChainHead> {
    const { reader } = await this.clients();
    const [genesis, height] = await Promise.all([reader.getBlock({ blockNumber: 0n }), reader.getBlockNumber({ cacheTime: 0 })]);
    return { genesis: genesis.hash, height: Number(height) };
  }

  /** Whether the chain holds a transaction (false: never sent, or lost when the chain went backwards). */
  async holds(txHash: Hex): Promise<boolean> {
    const { reader } = await this.clients();
    try {
      await reader.getTransaction({ hash: txHash });
      return true;
    } catch (err) {
      if ((err as Error).name === 'TransactionNotFoundError') return false;
      throw err;
    }
  }

  /** Where a broadcast transaction stands now. */
  async receiptOf(txHash: Hex): Promise<'success' | 'reverted' | 'pending'> {
    const { reader } = await this.clients();
    try {
      const r = await reader.getTransactionReceipt({ hash: txHash });
      return r.status === 'success' ? 'success' : 'reverted';
    } catch {
      return 'pending';
    }
  }

  async balanceOf(address: Address): Promise<bigint> {
    const { reader } = await this.clients();
    return (await reader.readContract({ address: this.cfg.token, abi, functionName: 'balanceOf', args: [address] })) as bigint;
  }

  async authorizationUsed(authorizer: Address, nonce: Hex): Promise<boolean> {
    const { reader } = await this.clients();
    return (await reader.readContract({ address: this.cfg.token, abi, functionName: 'authorizationState', args: [authorizer, nonce] })) as boolean;
  }

  /** Test networks only: mints test USDC (the facilitator is the token's minter on the local chain). */
  async mint(to: Address, value: bigint): Promise<Hex> {
    const { wallet, reader, account } = await this.clients();
    const hash = await this.send((nonce) => wallet.writeContract({ address: this.cfg.token, abi, functionName: 'mint', args: [to, value], chain: wallet.chain, account, ...(nonce === undefined ? {} : { nonce }) }));
    await reader.waitForTransactionReceipt({ hash, timeout: this.cfg.receiptTimeoutMs ?? 30_000 });
    return hash;
  }
}
