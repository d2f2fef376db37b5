import { type Address, createPublicClient, createWalletClient, type Hex, http, parseSignature } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import token from './test-usdc.json' with { type: 'json' };
import { x402Settlements } from '../../metrics.ts';
import type { ChainHead, NonceGate } from './nonces.ts';

// Settlement of EIP-3009 authorizations through any EVM RPC endpoint: the local
// chain in the sandbox, Base Sepolia or Base in production. The only file
// (with the signature checks) that imports viem.

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

export class EvmSettlement {
  private readonly account;
  private readonly wallet;
  private readonly reader;
  readonly facilitator: Address;
  /** One facilitator account sends one transaction at a time: account nonces stay in order. */
  private sending: Promise<unknown> = Promise.resolve();

  constructor(private readonly cfg: SettlementConfig) {
    this.account = privateKeyToAccount(cfg.facilitatorKey);
    this.facilitator = this.account.address;
    const chain = { id: cfg.chainId, name: `chain-${cfg.chainId}`, nativeCurrency: { name: 'ETH', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [cfg.rpcUrl] } } } as const;
    this.wallet = createWalletClient({ account: this.account, chain, transport: http(cfg.rpcUrl, { retryCount: 0 }) });
    this.reader = createPublicClient({ chain, transport: http(cfg.rpcUrl, { retryCount: 0 }) });
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
    const { r, s, v, yParity } = parseSignature(signature);
    const vv = Number(v ?? BigInt(27 + (yParity ?? 0)));
    let txHash: Hex;
    try {
      txHash = await this.send((nonce) =>
        this.wallet.writeContract({
          address: this.cfg.token,
          abi,
          functionName: 'transferWithAuthorization',
          args: [a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce, vv, r, s],
          chain: this.wallet.chain,
          account: this.account,
          ...(nonce === undefined ? {} : { nonce }),
        }),
      );
    } catch (err) {
      // Simulation or submission refused: nothing was broadcast.
      return { outcome: 'not_sent', reason: (err as { shortMessage?: string }).shortMessage ?? (err as Error).message };
    }
    try {
      const receipt = await this.reader.waitForTransactionReceipt({ hash: txHash, timeout: this.cfg.receiptTimeoutMs ?? 30_000 });
      if (receipt.status === 'success') return { outcome: 'settled', txHash, blockNumber: receipt.blockNumber };
      return { outcome: 'reverted', txHash, reason: 'the transfer reverted' };
    } catch (err) {
      return { outcome: 'unknown', txHash, reason: (err as Error).message };
    }
  }

  /** One send at a time in this process; across instances, under the nonce gate when there is one. */
  private send<T>(fn: (nonce: number | undefined) => Promise<T>): Promise<T> {
    const gate = this.cfg.nonces;
    const pending = () => this.reader.getTransactionCount({ address: this.account.address, blockTag: 'pending' });
    const run = this.sending.then(() => (gate ? gate(this.cfg.chainId, this.account.address, { pending, head: () => this.head() }, fn) : fn(undefined)));
    this.sending = run.catch(() => {});
    return run;
  }

  /** The chain's genesis hash and latest block number (the nonce gate notices a chain that went backwards). */
  async head(): Promise<ChainHead> {
    const [genesis, height] = await Promise.all([this.reader.getBlock({ blockNumber: 0n }), this.reader.getBlockNumber({ cacheTime: 0 })]);
    return { genesis: genesis.hash, height: Number(height) };
  }

  /** Whether the chain holds a transaction (false: never sent, or lost when the chain went backwards). */
  async holds(txHash: Hex): Promise<boolean> {
    try {
      await this.reader.getTransaction({ hash: txHash });
      return true;
    } catch (err) {
      if ((err as Error).name === 'TransactionNotFoundError') return false;
      throw err;
    }
  }

  /** Where a broadcast transaction stands now. */
  async receiptOf(txHash: Hex): Promise<'success' | 'reverted' | 'pending'> {
    try {
      const r = await this.reader.getTransactionReceipt({ hash: txHash });
      return r.status === 'success' ? 'success' : 'reverted';
    } catch {
      return 'pending';
    }
  }

  async balanceOf(address: Address): Promise<bigint> {
    return (await this.reader.readContract({ address: this.cfg.token, abi, functionName: 'balanceOf', args: [address] })) as bigint;
  }

  async authorizationUsed(authorizer: Address, nonce: Hex): Promise<boolean> {
    return (await this.reader.readContract({ address: this.cfg.token, abi, functionName: 'authorizationState', args: [authorizer, nonce] })) as boolean;
  }

  /** Test networks only: mints test USDC (the facilitator is the token's minter on the local chain). */
  async mint(to: Address, value: bigint): Promise<Hex> {
    const hash = await this.send((nonce) => this.wallet.writeContract({ address: this.cfg.token, abi, functionName: 'mint', args: [to, value], chain: this.wallet.chain, account: this.account, ...(nonce === undefined ? {} : { nonce }) }));
    await this.reader.waitForTransactionReceipt({ hash, timeout: this.cfg.receiptTimeoutMs ?? 30_000 });
    return hash;
  }
}
