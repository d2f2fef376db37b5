import type { FastifyReply } from 'fastify';

// The security headers of every HTML page this app serves to a person's
// browser (the OAuth consent page, the hosted-connect live view): no framing,
// a CSP that allows nothing by default but the dashboard's stylesheet (these
// pages share its look, src/dashboard/look.tsx) and no inline style, no
// caching, no referrer, no sniffing. A page that needs more names it (a
// script nonce, data: images, fetches to itself) and gets exactly that.

export type PageCsp = {
  /** Extra form-action target besides 'self'. */
  formTarget?: string;
  /** Inline scripts carrying this nonce may run. */
  scriptNonce?: string;
  /** Images from data: URLs (frames pushed as base64). */
  dataImages?: boolean;
  /** fetch / EventSource to this origin. */
  connectSelf?: boolean;
};

export function pageSecurityHeaders(csp: PageCsp = {}): Record<string, string> {
  const directives = [
    "default-src 'none'",
    "style-src 'self'",
    ...(csp.scriptNonce ? [`script-src 'nonce-${csp.scriptNonce}'`] : []),
    ...(csp.dataImages ? ['img-src data:'] : []),
    ...(csp.connectSelf ? ["connect-src 'self'"] : []),
    csp.formTarget ? `form-action 'self' ${csp.formTarget}` : "form-action 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ];
  return {
    'x-frame-options': 'DENY',
    'content-security-policy': directives.join('; '),
    'cache-control': 'no-store',
    pragma: 'no-cache',
    'referrer-policy': 'no-referrer',
    'x-content-type-options': 'nosniff',
  };
}

export function securityHeaders(reply: FastifyReply, csp: PageCsp = {}): void {
  reply.headers(pageSecurityHeaders(csp));
}

export const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
