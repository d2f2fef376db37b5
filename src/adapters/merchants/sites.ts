import type { HostedMerchant } from '../../../events/hosted-connect.ts';

// Where the two shopping merchants of hosted-browser connect (spec 4.16) log a
// person in: the login page the worker context opens, and the cookie whose
// presence says the person is logged in (finish refuses `not_logged_in`
// without it). Configured by MERCHANT_A_LOGIN_URL / MERCHANT_A_SESSION_COOKIE
// (and _B_); the embedded default is the sandbox merchants on loopback.

export type MerchantSite = { loginUrl: string; sessionCookie: string };
export type MerchantSites = Partial<Record<HostedMerchant, MerchantSite>>;

export const SANDBOX_SESSION_COOKIE = 'merchant_session';
