import { randomBytes } from 'node:crypto';
import { mcpPaytoDecider, mcpPaytoStream } from '../../commands/mcp.ts';
import { paytoAddress } from '../adapters/chain/payto.ts';
import type { Vault } from '../adapters/vault.ts';
import { type CommandContext, handleCommand, loadState } from '../eventstore/handler.ts';
import type { EventStore } from '../eventstore/port.ts';

// The organization's address seed: 32 random bytes in the vault, its reference
// in `mcp_payto-<org>` (first writer wins; a losing writer deletes its copy).
// Every provisioned address of the organization derives from it:
//   server  → label `server:<mcs_id>`   (receives the tool payments)
//   platform → label `platform`         (the organization's platform wallet, where fees are swept)

export class PaytoUnavailable extends Error {}

export async function orgSeed(store: EventStore, vault: Vault, ctx: CommandContext): Promise<Buffer> {
  try {
    const { state } = await loadState(store, mcpPaytoStream(ctx.orgId), mcpPaytoDecider);
    let ref = state.ref;
    if (!ref) {
      const mine = await vault.put(ctx.orgId, 'mcp_payto_seed', randomBytes(32));
      const r = await handleCommand(store, mcpPaytoDecider, mcpPaytoStream(ctx.orgId), { orgId: ctx.orgId, ref: mine }, ctx);
      ref = r.state.ref!;
      if (ref !== mine) await vault.delete(ctx.orgId, mine);
    }
    const seed = await vault.get(ctx.orgId, ref);
    if (!seed || seed.length !== 32) throw new Error('the seed is missing from the vault');
    return seed;
  } catch (err) {
    throw new PaytoUnavailable(`the receiving address could not be provisioned: ${(err as Error).message}`);
  }
}

export const serverLabel = (serverId: string) => `server:${serverId}`;
export const PLATFORM_LABEL = 'platform';
export const platformWallet = (seed: Uint8Array) => paytoAddress(seed, PLATFORM_LABEL);
export const serverAddress = (seed: Uint8Array, serverId: string) => paytoAddress(seed, serverLabel(serverId));
