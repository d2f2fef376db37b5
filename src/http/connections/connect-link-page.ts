import { servicePage } from '../../dashboard/look.tsx';
import { REJECTION_STATUS } from '../kernel/errors.ts';
import { escapeHtml, pageSecurityHeaders } from '../kernel/html.ts';

// The connect-link callback's refusals as a person's browser sees them: the
// provider sent the person here, so a bare JSON envelope would be a dead end.
// Same status and code as the envelope (the code is on the page), in the
// dashboard's look; any other client keeps the envelope.

const PAGES: Record<string, { title: string; detail: string }> = {
  link_token_unknown: { title: 'This connection link is not valid', detail: 'No connection link has this address. It may have been copied incompletely.' },
  link_token_used: { title: 'This connection link was already used', detail: 'Each connection link connects once. If the connection did not finish, ask the application for a new link.' },
  link_expired: { title: 'This connection link has expired', detail: 'A connection link works for ten minutes after the application creates it. Ask the application for a new link.' },
};

/** The page for a refusal code of the callback, or undefined when the code has none. */
export function connectLinkRefusalPage(code: string): { status: number; body: string; headers: Record<string, string> } | undefined {
  const page = PAGES[code];
  if (!page) return undefined;
  const body = `<p id="refusal-detail">${escapeHtml(page.detail)}</p><p>Return to the application and start again.</p><p class="hint">Error code: <code id="refusal-code">${escapeHtml(code)}</code></p>`;
  return { status: REJECTION_STATUS[code] ?? 400, body: servicePage({ title: page.title, bodyHtml: body }), headers: { 'content-type': 'text/html; charset=utf-8', ...pageSecurityHeaders() } };
}

/** Whether a request is a person's browser navigating (it asks for HTML). */
export const wantsHtml = (accept: string | string[] | undefined) => String(accept ?? '').includes('text/html');
