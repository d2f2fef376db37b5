import { hash } from 'node:crypto';
import type { ComponentChildren } from 'preact';
import { render } from 'preact-render-to-string';
import { assetText } from './assets.ts';
import { PublicShell } from './layout.tsx';

// The one look for the pages a person meets outside the dashboard: the OAuth
// consent page, the connect-link results, the hosted-connect live view (all
// served by this service: the stylesheet by its hashed URL) and the sandbox
// outbox (served by the sandbox on another origin: the same stylesheet's text
// inline, allowed by its hash). A rendering module: it registers no route and
// holds no session, so src/http and the sandbox adapters may import it.
// The bodies are HTML their callers built (and escaped) themselves: they keep
// the exact markup their tests and clients read (forms, ids).

type PageOptions = {
  title: string;
  /** The body's HTML, already escaped by the caller. */
  bodyHtml: string;
  /** The h1's content; false when the body carries its own h1. */
  heading?: ComponentChildren | false;
};

const Body = ({ html }: { html: string }) => <div class="page-body" dangerouslySetInnerHTML={{ __html: html }} />;

/** A page of this service outside the dashboard: the public shell with the stylesheet, no script of ours. */
export function servicePage({ title, bodyHtml, heading }: PageOptions): string {
  return `<!doctype html>${render(
    <PublicShell title={title} mode="styles" heading={heading}>
      <Body html={bodyHtml} />
    </PublicShell>,
  )}`;
}

let inline: { css: string; source: string } | undefined;
/** The stylesheet's text and its CSP source ('sha256-…'), read once. */
export function inlineStyle(): { css: string; source: string } {
  inline ??= (() => {
    const css = assetText('dashboard.css');
    return { css, source: `'sha256-${hash('sha256', css, 'base64')}'` };
  })();
  return inline;
}

/** A page served from another origin (the sandbox): the same shell, the stylesheet inline; its CSP allows exactly that text. */
export function standalonePage({ title, bodyHtml, heading }: PageOptions): { html: string; csp: string } {
  const { css, source } = inlineStyle();
  const html = `<!doctype html>${render(
    <PublicShell title={title} mode={{ inlineCss: css }} heading={heading}>
      <Body html={bodyHtml} />
    </PublicShell>,
  )}`;
  return { html, csp: `default-src 'none'; style-src ${source}; form-action 'self'; frame-ancestors 'none'; base-uri 'none'` };
}
