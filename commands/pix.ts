import type { DomainEvent } from '../events/index.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';
import type { Tenant } from './consumer.ts';

// Pix deciders: the consumer's partner account (funding source, contact
// verifications, key cache), a charge, a receivement, and the notification
// replay guard. PSP calls happen in the route before a command; a decider only
// records what the PSP answered.

export const pixAccountStream = (consumerId: string) => `pix_account-${consumerId}`;
export const pixChargeStream = (chargeId: string) => `pix_charge-${chargeId}`;
export const pixReceivementStream = (psp: string, e2eid: string) => `pix_receivement-${psp}.${e2eid}`;
export const pixNotificationStream = (psp: string, messageId: string) => `pix_notification-${psp}.${messageId}`;

/** How long a contact verification stays "recent" for registering an e-mail or phone key. */
export const CONTACT_VERIFICATION_WINDOW_DAYS = 30;
export const CONTACT_VERIFICATION_WINDOW = `P${CONTACT_VERIFICATION_WINDOW_DAYS}D`;
/** How long a one-time code may be confirmed. */
export const CONTACT_CODE_TTL_MS = 15 * 60_000;
/** Wrong codes before a verification is locked (a 6-digit code must not be guessable online). */
export const CONTACT_CODE_MAX_ATTEMPTS = 5;

type Verification = { channel: 'email' | 'phone'; endpoint: string; codeHash: string; expiresAt: string; verifiedAt: string | null; attempts: number };

export type PixAccount = {
  status: 'open';
  consumerId: string;
  orgId: string;
  projectId: string;
  accountId: string;
  psp: 'sandbox' | 'live';
  pspAccount: string;
  document: string;
  documentType: 'CPF' | 'CNPJ';
  fundingSources: Record<string, boolean>;
  verifications: Record<string, Verification>;
  keys: Record<string, string>;
  /** Registrations whose outcome the PSP never told us; cleared by a reconciliation. */
  uncertain: { keyType: string; key: string | null }[];
  /**
   * EVP keys a reconciliation found while an EVP registration was uncertain:
   * the next EVP registration adopts one instead of drawing a second key.
   */
  pendingEvp: string[];
};
export type PixAccountState = { status: 'none' } | PixAccount;

export type PixAccountCommand =
  | { type: 'open'; tenant: Tenant; consumerId: string; accountId: string; fundingSourceId: string; psp: 'sandbox' | 'live'; pspAccount: string; branch: string; ispb: string; document: string; documentType: 'CPF' | 'CNPJ'; documentSource: 'psp_kyc' | 'sandbox' }
  | { type: 'deactivate_funding_source'; tenant: Tenant; fundingSourceId: string; reason: string | null }
  | { type: 'start_contact_verification'; tenant: Tenant; verificationId: string; channel: 'email' | 'phone'; endpoint: string; codeHash: string; expiresAt: string }
  | { type: 'confirm_contact_verification'; tenant: Tenant; verificationId: string; codeHash: string }
  | { type: 'key_registered'; tenant: Tenant; key: string; keyType: string }
  | { type: 'key_uncertain'; tenant: Tenant; keyType: string; key: string | null }
  | { type: 'key_deleted'; tenant: Tenant; key: string }
  | { type: 'reconcile'; tenant: Tenant; inventory: { key: string; keyType: string }[] };

export function ownAccount(state: PixAccountState, t: Tenant): PixAccount {
  if (state.status === 'none' || state.orgId !== t.orgId || state.projectId !== t.projectId) throw new Rejection('no_partner_account', 'the consumer has no partner account at a PSP');
  return state;
}

/** The most recent verified contact of this channel and endpoint within the window, if any. */
export function recentVerification(a: PixAccount, channel: 'email' | 'phone', endpoint: string, now: string): boolean {
  const since = Date.parse(now) - CONTACT_VERIFICATION_WINDOW_DAYS * 86_400_000;
  return Object.values(a.verifications).some((v) => v.channel === channel && v.endpoint === endpoint && v.verifiedAt !== null && Date.parse(v.verifiedAt) >= since);
}

export const pixAccountDecider: Decider<PixAccountState, PixAccountCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve(s, e) {
    if (e.type === 'pix.partner_account_opened') {
      const d = e.data;
      return { status: 'open', consumerId: d.consumer_id, orgId: d.org_id, projectId: d.project_id, accountId: d.account_id, psp: d.psp, pspAccount: d.psp_account, document: d.document, documentType: d.document_type, fundingSources: {}, verifications: {}, keys: {}, uncertain: [], pendingEvp: [] };
    }
    if (s.status === 'none') return s;
    switch (e.type) {
      case 'pix.funding_source_activated':
        return { ...s, fundingSources: { ...s.fundingSources, [e.data.funding_source_id]: true } };
      case 'pix.funding_source_deactivated':
        return { ...s, fundingSources: { ...s.fundingSources, [e.data.funding_source_id]: false } };
      case 'pix.contact_verification_started':
        return { ...s, verifications: { ...s.verifications, [e.data.verification_id]: { channel: e.data.channel, endpoint: e.data.endpoint, codeHash: e.data.code_hash, expiresAt: e.data.expires_at, verifiedAt: null, attempts: 0 } } };
      case 'pix.contact_verification_failed': {
        const v = s.verifications[e.data.verification_id];
        return v ? { ...s, verifications: { ...s.verifications, [e.data.verification_id]: { ...v, attempts: e.data.attempts } } } : s;
      }
      case 'pix.contact_verified': {
        const v = s.verifications[e.data.verification_id];
        return v ? { ...s, verifications: { ...s.verifications, [e.data.verification_id]: { ...v, verifiedAt: e.data.verified_at } } } : s;
      }
      case 'pix.key_registered':
        return { ...s, keys: { ...s.keys, [e.data.key]: e.data.key_type }, uncertain: s.uncertain.filter((u) => u.key !== e.data.key), pendingEvp: s.pendingEvp.filter((k) => k !== e.data.key) };
      case 'pix.key_deleted': {
        const keys = { ...s.keys };
        delete keys[e.data.key];
        return { ...s, keys, pendingEvp: s.pendingEvp.filter((k) => k !== e.data.key) };
      }
      case 'pix.key_registration_uncertain':
        return { ...s, uncertain: [...s.uncertain, { keyType: e.data.key_type, key: e.data.key }] };
      case 'pix.keys_reconciled': {
        const keys = { ...s.keys };
        for (const k of e.data.removed) delete keys[k];
        for (const a of e.data.added) keys[a.key] = a.key_type;
        const evpUncertain = s.uncertain.some((u) => u.keyType === 'EVP');
        const found = evpUncertain ? e.data.added.filter((a) => a.key_type === 'EVP').map((a) => a.key) : [];
        return { ...s, keys, uncertain: [], pendingEvp: [...s.pendingEvp.filter((k) => k in keys), ...found] };
      }
      default:
        return s;
    }
  },
  decide(c, s, { now }): DomainEvent[] {
    if (c.type === 'open') {
      if (s.status !== 'none') throw new Rejection('partner_account_exists', 'the consumer already has a partner account', { account_id: s.accountId });
      return [
        { type: 'pix.partner_account_opened', data: { consumer_id: c.consumerId, org_id: c.tenant.orgId, project_id: c.tenant.projectId, account_id: c.accountId, psp: c.psp, psp_account: c.pspAccount, branch: c.branch, ispb: c.ispb, document: c.document, document_type: c.documentType, document_source: c.documentSource, opened_at: now } },
        { type: 'pix.funding_source_activated', data: { consumer_id: c.consumerId, org_id: c.tenant.orgId, project_id: c.tenant.projectId, funding_source_id: c.fundingSourceId, account_id: c.accountId, currency: 'BRL', activated_at: now } },
      ];
    }
    const a = ownAccount(s, c.tenant);
    const base = { consumer_id: a.consumerId, account_id: a.accountId };
    switch (c.type) {
      case 'deactivate_funding_source':
        if (!(c.fundingSourceId in a.fundingSources)) throw new Rejection('funding_source_not_found', 'no such funding source');
        if (!a.fundingSources[c.fundingSourceId]) return [];
        return [{ type: 'pix.funding_source_deactivated', data: { consumer_id: a.consumerId, funding_source_id: c.fundingSourceId, reason: c.reason, deactivated_at: now } }];
      case 'start_contact_verification':
        return [{ type: 'pix.contact_verification_started', data: { consumer_id: a.consumerId, verification_id: c.verificationId, channel: c.channel, endpoint: c.endpoint, code_hash: c.codeHash, expires_at: c.expiresAt, started_at: now } }];
      case 'confirm_contact_verification': {
        const v = a.verifications[c.verificationId];
        if (!v) throw new Rejection('not_found', 'contact verification not found');
        if (v.verifiedAt) return [];
        if (Date.parse(v.expiresAt) <= Date.parse(now)) throw new Rejection('contact_verification_expired', 'the code has expired; start a new verification');
        if (v.attempts >= CONTACT_CODE_MAX_ATTEMPTS) throw new Rejection('contact_verification_locked', 'too many wrong codes; start a new verification');
        // A wrong code is a fact (it counts toward the lock); the route answers the mismatch after recording it.
        if (v.codeHash !== c.codeHash) return [{ type: 'pix.contact_verification_failed', data: { consumer_id: a.consumerId, verification_id: c.verificationId, attempts: v.attempts + 1, failed_at: now } }];
        return [{ type: 'pix.contact_verified', data: { consumer_id: a.consumerId, verification_id: c.verificationId, channel: v.channel, endpoint: v.endpoint, verified_at: now } }];
      }
      case 'key_registered':
        if (a.keys[c.key] && !a.pendingEvp.includes(c.key)) return [];
        return [{ type: 'pix.key_registered', data: { ...base, key: c.key, key_type: c.keyType, registered_at: now } }];
      case 'key_uncertain':
        return [{ type: 'pix.key_registration_uncertain', data: { ...base, key_type: c.keyType, key: c.key, attempted_at: now } }];
      case 'key_deleted':
        return [{ type: 'pix.key_deleted', data: { ...base, key: c.key, deleted_at: now } }];
      case 'reconcile': {
        const inv = new Map(c.inventory.map((k) => [k.key, k.keyType]));
        const added = [...inv].filter(([k]) => !(k in a.keys)).map(([key, key_type]) => ({ key, key_type }));
        const removed = Object.keys(a.keys).filter((k) => !inv.has(k));
        if (added.length === 0 && removed.length === 0 && a.uncertain.length === 0) return [];
        return [{ type: 'pix.keys_reconciled', data: { ...base, added, removed, inventory_count: inv.size, reconciled_at: now } }];
      }
    }
  },
};

// ---- charges

export type PixCharge = { status: 'pending' | 'settled'; chargeId: string; orgId: string; projectId: string; consumerId: string; walletId: string; amountMinor: string; endToEndId: string | null };
export type PixChargeState = { status: 'none' } | PixCharge;
export type PixChargeCommand =
  | { type: 'create'; data: Extract<DomainEvent, { type: 'pix.charge_created' }>['data'] }
  | { type: 'settle'; endToEndId: string; receivedMinor: string };

export const pixChargeDecider: Decider<PixChargeState, PixChargeCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve(s, e) {
    if (e.type === 'pix.charge_created') {
      const d = e.data;
      return { status: 'pending', chargeId: d.charge_id, orgId: d.org_id, projectId: d.project_id, consumerId: d.consumer_id, walletId: d.wallet_id, amountMinor: d.amount_minor, endToEndId: null };
    }
    if (e.type === 'pix.charge_settled' && s.status !== 'none') return { ...s, status: 'settled', endToEndId: e.data.end_to_end_id };
    return s;
  },
  decide(c, s, { now }): DomainEvent[] {
    if (c.type === 'create') {
      if (s.status !== 'none') throw new Rejection('charge_exists', 'charge exists');
      return [{ type: 'pix.charge_created', data: c.data }];
    }
    if (s.status === 'none') throw new Rejection('not_found', 'charge not found');
    // A charge settles once; a second Pix for it is recorded on its receivement, not here.
    if (s.status === 'settled') return [];
    return [{ type: 'pix.charge_settled', data: { charge_id: s.chargeId, end_to_end_id: c.endToEndId, received_minor: c.receivedMinor, settled_at: now } }];
  },
};

// ---- receivements

type Received = Extract<DomainEvent, { type: 'pix.received' }>['data'];
export type PixReceivementState = { status: 'none' } | { status: 'received'; data: Received; credited: boolean; devolutions: Record<string, string> };
export type PixReceivementCommand =
  | { type: 'receive'; data: Received }
  | { type: 'credit'; walletId: string; chargeId: string; amountMinor: string }
  | { type: 'devolve'; devolutionId: string; rtrId: string | null; amountMinor: string; status: string; walletId: string | null };

export const pixReceivementDecider: Decider<PixReceivementState, PixReceivementCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve(s, e) {
    if (e.type === 'pix.received') return { status: 'received', data: e.data, credited: false, devolutions: {} };
    if (s.status === 'none') return s;
    if (e.type === 'pix.wallet_credited') return { ...s, credited: true };
    if (e.type === 'pix.devolution_requested') return { ...s, devolutions: { ...s.devolutions, [e.data.devolution_id]: e.data.amount_minor } };
    return s;
  },
  decide(c, s, { now }): DomainEvent[] {
    if (c.type === 'receive') return s.status === 'none' ? [{ type: 'pix.received', data: c.data }] : [];
    if (s.status === 'none') throw new Rejection('not_found', 'receivement not found');
    if (c.type === 'credit') {
      // Exactly once: however many times the PSP notifies, the wallet is credited by the first.
      if (s.credited) return [];
      return [{ type: 'pix.wallet_credited', data: { end_to_end_id: s.data.end_to_end_id, consumer_id: s.data.consumer_id, wallet_id: c.walletId, charge_id: c.chargeId, currency: 'BRL', amount_minor: c.amountMinor, credited_at: now } }];
    }
    if (c.devolutionId in s.devolutions) return [];
    return [{ type: 'pix.devolution_requested', data: { end_to_end_id: s.data.end_to_end_id, consumer_id: s.data.consumer_id, devolution_id: c.devolutionId, rtr_id: c.rtrId, amount_minor: c.amountMinor, wallet_id: s.credited ? c.walletId : null, status: c.status, requested_at: now } }];
  },
};

// ---- notification replay guard (appended with no_stream)

export type PixNotificationCommand = { type: 'accept'; psp: 'sandbox' | 'live'; messageId: string; endToEndIds: string[] };
export const pixNotificationDecider: Decider<{ seen: boolean }, PixNotificationCommand> = {
  initialState: () => ({ seen: false }),
  evolve: (_s, e) => (e.type === 'pix.notification_accepted' ? { seen: true } : _s),
  decide(c, s, { now }): DomainEvent[] {
    if (s.seen) throw new Rejection('webhook_replayed', 'this notification was already received');
    return [{ type: 'pix.notification_accepted', data: { psp: c.psp, message_id: c.messageId, end_to_end_ids: c.endToEndIds, accepted_at: now } }];
  },
};
