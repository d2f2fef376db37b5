import { CONTACT_VERIFICATION_WINDOW, type PixAccount, pixAccountDecider, pixAccountStream, recentVerification } from '../../commands/pix.ts';
import { canonicalAnyKey, canonicalKey, type KeyType } from '../../commands/pix-format.ts';
import type { Psp, PspKey } from '../adapters/psp/port.ts';
import { Rejection } from '../eventstore/handler.ts';
import type { Ports, RunCommand, Tenant } from './context.ts';
import { accountMasked, loadAccount, notConfigured, pspOf, PspError } from './pix-common.ts';

// Pix keys of a consumer's partner account. The PSP's directory is the truth;
// our key cache (projection `pix_keys`) is reconciled against its inventory on
// every listing, after a deletion, and before a registration when an earlier
// one ended without an answer (the uncertain case).

export type PixKeyRow = { key: string; key_type: string };
export type RegisteredPixKey = { key: string; key_type: string; account_masked: string; cache_filled: boolean; reconciled: boolean };

type KeyPorts = Pick<Ports, 'db' | 'store' | 'pix'>;

const providerRefused = (err: PspError) => new Rejection('pix_key_provider_refused', 'the PSP refused the request', { provider_status: err.status, provider_code: err.code });
const providerTransient = (err: PspError) => new Rejection('pix_key_provider_unavailable', 'the PSP is unavailable; retry later', { provider_status: err.status, provider_code: err.code });
const uncertain = (inventory: PspKey[] | null) =>
  new Rejection('pix_key_registration_uncertain', 'the PSP did not say whether the key was registered; list keys instead of repeating', { retry_safe: false, inventory_known: inventory !== null, inventory_count: inventory?.length ?? null });

async function readKeys(ports: Pick<Ports, 'db'>, consumerId: string): Promise<PixKeyRow[]> {
  const { rows } = await ports.db.query<PixKeyRow>('SELECT key, key_type FROM pix_keys WHERE consumer_id = $1 ORDER BY pix_keys.registered_at, key', [consumerId]);
  return rows;
}

/** Sets the key cache to the PSP's inventory (an event only when they differ or a registration was uncertain). */
async function reconcile(run: RunCommand, tenant: Tenant, a: PixAccount, inventory: PspKey[]): Promise<PixAccount> {
  const r = await run(pixAccountDecider, pixAccountStream(a.consumerId), { type: 'reconcile', tenant, inventory });
  return r.state as PixAccount;
}

/** The account's keys as the PSP's directory has them, the key cache reconciled with it first. */
export async function listPixKeys(ports: KeyPorts, run: RunCommand, tenant: Tenant, consumerId: string): Promise<{ account_masked: string; keys: PixKeyRow[]; count: number }> {
  const a = await loadAccount(ports, tenant, consumerId);
  let inventory: PspKey[];
  try {
    inventory = await pspOf(ports, a.psp).listKeys(a.pspAccount);
  } catch (err) {
    notConfigured(err);
    if (err instanceof PspError && err.reason === 'refused') throw providerRefused(err);
    if (err instanceof PspError) throw providerTransient(err);
    throw err;
  }
  await reconcile(run, tenant, a, inventory);
  const keys = await readKeys(ports, a.consumerId);
  return { account_masked: accountMasked(a), keys, count: keys.length };
}

/** The canonical key a registration names (null for an EVP, which the PSP draws): pix_key_invalid when it is not one. */
function canonicalOf(body: { key_type: KeyType; key?: string | undefined }): string | null {
  if (body.key_type === 'EVP') return null;
  const k = canonicalKey(body.key_type, body.key!);
  if (!k.ok) throw new Rejection('pix_key_invalid', k.reason, { key_type: body.key_type });
  return k.key;
}

/** A CPF or CNPJ key is the holder's own document; an email or phone key was verified recently. */
function checkOwnership(a: PixAccount, keyType: KeyType, key: string | null, now: Date): void {
  if ((keyType === 'CPF' || keyType === 'CNPJ') && (a.documentType !== keyType || a.document !== key)) {
    throw new Rejection('pix_key_document_mismatch', `a ${keyType} key must be the account holder's own document`, { key_type: keyType });
  }
  if (keyType === 'EMAIL' || keyType === 'PHONE') {
    const channel = keyType === 'EMAIL' ? 'email' : 'phone';
    if (!recentVerification(a, channel, key!, now.toISOString())) {
      throw new Rejection('pix_key_ownership_unverified', `verify the ${channel} first: POST /v1/consumers/{consumerId}/pix/contact-verifications`, { channel, endpoint: key, window: CONTACT_VERIFICATION_WINDOW });
    }
  }
}

/** Register a key at the PSP; a repeat after an uncertain registration is settled against the inventory first. */
export async function registerPixKey(ports: KeyPorts & Pick<Ports, 'now'>, run: RunCommand, tenant: Tenant, consumerId: string, body: { key_type: KeyType; key?: string | undefined }): Promise<RegisteredPixKey> {
  const key = canonicalOf(body);
  let a = await loadAccount(ports, tenant, consumerId);
  checkOwnership(a, body.key_type, key, ports.now());
  const psp = pspOf(ports, a.psp);

  // An earlier registration ended without an answer: settle it against the inventory first.
  if (a.uncertain.length > 0) {
    let inventory: PspKey[] | null = null;
    try {
      inventory = await psp.listKeys(a.pspAccount);
    } catch {
      throw uncertain(null);
    }
    a = await reconcile(run, tenant, a, inventory);
    if (key !== null && a.keys[key]) return { key, key_type: body.key_type, account_masked: accountMasked(a), cache_filled: true, reconciled: true };
  }
  // An EVP found by a reconciliation of an uncertain EVP registration is the one this repeat asked for.
  if (body.key_type === 'EVP' && a.pendingEvp.length > 0) {
    const evp = a.pendingEvp[0]!;
    await run(pixAccountDecider, pixAccountStream(a.consumerId), { type: 'key_registered', tenant, key: evp, keyType: 'EVP' });
    return { key: evp, key_type: 'EVP', account_masked: accountMasked(a), cache_filled: true, reconciled: true };
  }

  let registered: PspKey;
  try {
    registered = await psp.registerKey(a.pspAccount, { keyType: body.key_type, ...(key !== null ? { key } : {}) });
  } catch (err) {
    return await registrationFailed(err, run, tenant, psp, a, body.key_type, key);
  }
  const r = await run(pixAccountDecider, pixAccountStream(a.consumerId), { type: 'key_registered', tenant, key: registered.key, keyType: registered.keyType });
  const cached = (await ports.db.query('SELECT 1 FROM pix_keys WHERE consumer_id = $1 AND key = $2', [a.consumerId, registered.key])).rowCount === 1;
  return { key: registered.key, key_type: registered.keyType, account_masked: accountMasked(r.state as PixAccount), cache_filled: cached, reconciled: false };
}

/**
 * A registration the PSP did not answer with a key: the key adopted when it
 * is already the account's, else the refusal, or, when the PSP may have
 * registered it, the outcome recorded as unknown.
 */
async function registrationFailed(err: unknown, run: RunCommand, tenant: Tenant, psp: Psp, a: PixAccount, keyType: KeyType, key: string | null): Promise<RegisteredPixKey> {
  notConfigured(err);
  if (!(err instanceof PspError)) throw err;
  if (err.reason === 'refused' && err.code === 'ENTRY_ALREADY_EXISTS' && key !== null) {
    // Already this account's key (an earlier attempt went through): adopt it from the inventory.
    const inventory = await psp.listKeys(a.pspAccount).catch(() => null);
    if (inventory?.some((k) => k.key === key)) {
      const s = await reconcile(run, tenant, a, inventory);
      return { key, key_type: keyType, account_masked: accountMasked(s), cache_filled: true, reconciled: true };
    }
  }
  if (err.reason === 'refused') throw providerRefused(err);
  if (err.reason === 'unavailable') throw providerTransient(err);
  if (err.reason === 'unreachable') throw new Rejection('pix_key_provider_unavailable', 'the PSP could not be reached; nothing was sent');
  // The PSP may have registered it: record that the outcome is unknown.
  const markUncertain = () => run(pixAccountDecider, pixAccountStream(a.consumerId), { type: 'key_uncertain', tenant, keyType, key });
  if (err.reason === 'malformed') {
    await markUncertain();
    // Answered in the spec's framework-default shape for this operation's failures (src/http/kernel/errors.ts RAW_REJECTIONS).
    throw new Rejection('pix_key_provider_malformed', 'the PSP answered the registration with a body that cannot be read; list keys to see whether it was registered');
  }
  let inventory: PspKey[] | null = null;
  try {
    inventory = await psp.listKeys(a.pspAccount);
  } catch {
    inventory = null;
  }
  if (inventory && key !== null && !inventory.some((k) => k.key === key)) {
    // Provably not registered: the inventory answered and the key is absent. Retrying is safe.
    throw new Rejection('pix_key_provider_unavailable', 'the PSP did not answer and the key is not registered; retry', { verified_not_registered: true, inventory_count: inventory.length });
  }
  await markUncertain();
  throw uncertain(inventory);
}

/** Delete a key at the PSP; the key cache is cleared, then refilled from the inventory (best effort). */
export async function deletePixKey(ports: KeyPorts, run: RunCommand, tenant: Tenant, consumerId: string, rawKey: string) {
  const key = canonicalAnyKey(rawKey);
  const a = await loadAccount(ports, tenant, consumerId);
  const psp = pspOf(ports, a.psp);
  try {
    await psp.deleteKey(a.pspAccount, key);
  } catch (err) {
    notConfigured(err);
    if (!(err instanceof PspError)) throw err;
    if (err.reason === 'refused') throw providerRefused(err);
    if (err.reason === 'timeout' || err.reason === 'malformed') throw new Rejection('pix_key_provider_unavailable', 'the outcome of the deletion is unknown; list keys to confirm', { outcome: 'unknown' });
    throw providerTransient(err);
  }
  const wasCached = key in a.keys;
  let s = (await run(pixAccountDecider, pixAccountStream(a.consumerId), { type: 'key_deleted', tenant, key })).state as PixAccount;
  try {
    s = await reconcile(run, tenant, s, await psp.listKeys(a.pspAccount));
  } catch {
    // The refill is best effort; the next listing reconciles.
  }
  const remaining = await readKeys(ports, a.consumerId);
  return { key, account_masked: accountMasked(s), deleted: true as const, cache_cleared: wasCached, cache_refilled_with: remaining[0]?.key ?? null };
}
