import { PIX_WALLET_SQL } from '../../projections/pix.ts';
import type { Ports, Tenant } from './context.ts';

// The consumer's Pix wallets for the consumer wallet view: one per Pix funding
// source, its balance = credited receivements - devolutions (projection `pix`).

export type PixWalletRow = { funding_source_id: string; currency: string; status: 'active' | 'inactive'; balance_minor: string };

export async function pixWallets(ports: Pick<Ports, 'db'>, tenant: Tenant, consumerId: string): Promise<PixWalletRow[]> {
  return (await ports.db.query<PixWalletRow>(PIX_WALLET_SQL, [consumerId, tenant.orgId, tenant.projectId])).rows;
}
