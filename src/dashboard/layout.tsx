import type { ComponentChildren, VNode } from 'preact';
import { render } from 'preact-render-to-string';
import type { FastifyReply } from 'fastify';
import { assetUrl } from './assets.ts';
import type { Person } from './session.ts';
import { SearchBox } from './search-box.tsx';

// The dashboard's shell: header (organization switcher when the person
// belongs to several, project switcher, the test/live switch, always
// visible), navigation, a role="status" notice saying what the last action
// did, a skip link, a footer. `PublicShell` is the bare frame of signed-out
// pages and of other services' pages (the OAuth consent page, the sandbox
// outbox). Every page is rendered to a string here, with its headers.

export type Active = 'home' | 'approvals' | 'team' | 'keys' | 'audit' | 'account' | 'agents' | 'consumers' | 'webhooks' | 'connections' | 'sessions' | 'mcp' | 'usage' | 'policies' | 'memory' | 'search';

const NAV: readonly { key: Active; href: string; label: string }[] = [
  { key: 'home', href: '/dashboard', label: 'Home' },
  { key: 'approvals', href: '/dashboard/approvals', label: 'Approvals' },
  { key: 'agents', href: '/dashboard/agents', label: 'Agents' },
  { key: 'consumers', href: '/dashboard/consumers', label: 'Consumers' },
  { key: 'policies', href: '/dashboard/policies', label: 'Policies' },
  { key: 'sessions', href: '/dashboard/sessions', label: 'Sessions' },
  { key: 'connections', href: '/dashboard/connections', label: 'Connections' },
  { key: 'webhooks', href: '/dashboard/webhooks', label: 'Webhooks' },
  { key: 'mcp', href: '/dashboard/mcp-servers', label: 'MCP servers' },
  { key: 'usage', href: '/dashboard/usage', label: 'Usage' },
  { key: 'memory', href: '/dashboard/memory', label: 'Memory' },
  { key: 'audit', href: '/dashboard/audit', label: 'Audit' },
  { key: 'team', href: '/dashboard/team', label: 'Team' },
  { key: 'keys', href: '/dashboard/keys', label: 'API keys' },
];

type Notice = { text: string; tone?: 'ok' | 'error' } | string | null | undefined;

function NoticeRegion({ notice }: { notice: Notice }) {
  const n = typeof notice === 'string' ? { text: notice, tone: 'ok' as const } : notice;
  return (
    <div id="notice" role="status" class={`notice${n?.tone === 'error' ? ' error' : ''}`}>
      {n?.text ?? ''}
    </div>
  );
}

/**
 * How a page gets its look: 'full' (the stylesheet, htmx and the dashboard's
 * script), 'styles' (the stylesheet only: pages of the service that run no
 * script of ours, such as the OAuth consent page), or the stylesheet's text
 * inline (a page served from another origin, the sandbox outbox, whose CSP
 * names the text's hash).
 */
export type HeadMode = 'full' | 'styles' | { inlineCss: string };

function Head({ title, csrf, scripts = [], styles = [], mode = 'full' }: { title: string; csrf?: string; scripts?: readonly string[]; styles?: readonly string[]; mode?: HeadMode }) {
  if (mode !== 'full') {
    return (
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${title} · Agent Ledger`}</title>
        {mode === 'styles' ? <link rel="stylesheet" href={assetUrl('dashboard.css')} /> : <style dangerouslySetInnerHTML={{ __html: mode.inlineCss }} />}
      </head>
    );
  }
  return (
    <head>
      <meta charset="utf-8" />
      <meta name="viewport" content="width=device-width, initial-scale=1" />
      <title>{`${title} · Agent Ledger`}</title>
      {csrf ? <meta name="csrf-token" content={csrf} /> : null}
      {/* htmx would add an inline <style> (its indicator styles); the CSP allows none. */}
      <meta name="htmx-config" content='{"includeIndicatorStyles":false}' />
      <link rel="stylesheet" href={assetUrl('dashboard.css')} />
      {styles.map((s) => (
        <link rel="stylesheet" href={assetUrl(s)} />
      ))}
      <script src={assetUrl('htmx.js')} defer />
      {scripts.map((s) => (
        <script src={assetUrl(s)} defer />
      ))}
      <script src={assetUrl('dashboard.js')} defer />
    </head>
  );
}

function Footer({ links = true }: { links?: boolean }) {
  return (
    <footer class="footer">
      <div class="footer-inner">
        <span>Agent Ledger: every change here is an event, sealed in your audit chain.</span>
        {links ? <a href="/docs">API reference</a> : null}
      </div>
    </footer>
  );
}

/** One switcher: a labelled list posting the chosen value to /dashboard/switch, back to `back`. */
function SwitchForm({ csrf, back, id, name, label, options, selected }: { csrf: string; back: string; id: string; name: string; label: string; options: readonly { value: string; text: string }[]; selected: string }) {
  return (
    <form method="post" action="/dashboard/switch">
      <input type="hidden" name="_csrf" value={csrf} />
      <input type="hidden" name="next" value={back} />
      <label for={id}>{label}</label>
      <select id={id} name={name}>
        {options.map((o) => (
          <option value={o.value} selected={o.value === selected}>
            {o.text}
          </option>
        ))}
      </select>
      <button type="submit" class="btn btn-secondary btn-small">
        Switch
      </button>
    </form>
  );
}

function Switchers({ person, back }: { person: Person; back: string }) {
  const csrf = person.csrfToken;
  return (
    <div class="switchers">
      {person.orgs.length > 1 ? (
        <SwitchForm csrf={csrf} back={back} id="switch-org" name="org" label="Organization" options={person.orgs.map((o) => ({ value: o.orgId, text: o.name }))} selected={person.orgId} />
      ) : (
        <span>{person.orgs.find((o) => o.orgId === person.orgId)?.name ?? ''}</span>
      )}
      <SwitchForm csrf={csrf} back={back} id="switch-project" name="project" label="Project" options={person.projects.map((p) => ({ value: p.id, text: p.name }))} selected={person.projectId} />
      <form method="post" action="/dashboard/switch" aria-label="Environment">
        <input type="hidden" name="_csrf" value={csrf} />
        <input type="hidden" name="next" value={back} />
        <span class="env" role="group" aria-label="Environment">
          <button type="submit" name="environment" value="test" aria-pressed={person.environment === 'test' ? 'true' : 'false'} id="env-test">
            Test
          </button>
          <button type="submit" name="environment" value="live" aria-pressed={person.environment === 'live' ? 'true' : 'false'} id="env-live">
            Live
          </button>
        </span>
      </form>
      <form method="post" action="/dashboard/sign-out">
        <input type="hidden" name="_csrf" value={csrf} />
        <button type="submit" class="btn-link" id="sign-out">
          Sign out
        </button>
      </form>
    </div>
  );
}

/**
 * The navigation: a row of links on a wide screen; on a phone a disclosure
 * (<details>: a button saying where you are, the links when opened), which
 * works with the keyboard and without script (dashboard.css shows its content
 * always on a wide screen).
 */
function Nav({ person, active }: { person: Person; active: Active }) {
  const here = active === 'account' ? 'Account' : active === 'search' ? 'Search' : NAV.find((n) => n.key === active)?.label;
  return (
    <nav class="nav" aria-label="Dashboard">
      <details class="nav-menu">
        <summary>
          <span>Menu</span>
          {here ? (
            <span class="nav-here">
              <span class="visually-hidden">, this page: </span>
              {here}
            </span>
          ) : null}
        </summary>
        <ul>
          {NAV.map((n) => (
            <li>
              <a href={n.href} aria-current={n.key === active ? 'page' : undefined}>
                {n.label}
              </a>
            </li>
          ))}
          <li>
            <a href="/dashboard/account" aria-current={active === 'account' ? 'page' : undefined}>
              {person.email}
            </a>
          </li>
        </ul>
      </details>
    </nav>
  );
}

type ShellProps = {
  person: Person;
  title: string;
  active: Active;
  notice?: Notice;
  /** The path the switchers come back to (this page). */
  path?: string;
  scripts?: readonly string[];
  styles?: readonly string[];
  children: ComponentChildren;
};

export function Shell({ person, title, active, notice, path, scripts, styles, children }: ShellProps) {
  return (
    <html lang="en">
      <Head title={title} csrf={person.csrfToken} {...(scripts ? { scripts } : {})} {...(styles ? { styles } : {})} />
      <body>
        <a class="skip-link" href="#main">
          Skip to main content
        </a>
        <header class="header">
          <div class="header-inner">
            <a class="brand" href="/dashboard">
              Agent Ledger
            </a>
            <SearchBox />
            <Switchers person={person} back={path ?? '/dashboard'} />
          </div>
          <div class={`env-banner ${person.environment}`} id="env-banner">
            {person.environment === 'live' ? 'Live data: real money moves.' : 'Test data: nothing here moves real money.'}
          </div>
        </header>
        <Nav person={person} active={active} />
        <main class="main" id="main" tabIndex={-1}>
          <NoticeRegion notice={notice} />
          <h1>{title}</h1>
          {children}
        </main>
        <Footer />
      </body>
    </html>
  );
}

type PublicShellProps = {
  title: string;
  notice?: Notice;
  children: ComponentChildren;
  scripts?: readonly string[];
  /** The h1's content (default: the title); false when the children carry their own h1. */
  heading?: ComponentChildren | false;
  mode?: HeadMode;
};

export function PublicShell({ title, notice, children, scripts, heading, mode = 'full' }: PublicShellProps) {
  // A page served from another origin links nowhere on this one.
  const here = typeof mode === 'string';
  return (
    <html lang="en">
      <Head title={title} mode={mode} {...(scripts ? { scripts } : {})} />
      <body>
        <a class="skip-link" href="#main">
          Skip to main content
        </a>
        <header class="header">
          <div class="header-inner">
            {here ? (
              <a class="brand" href="/dashboard">
                Agent Ledger
              </a>
            ) : (
              <span class="brand">Agent Ledger</span>
            )}
          </div>
        </header>
        <main class="main narrow" id="main" tabIndex={-1}>
          <NoticeRegion notice={notice} />
          {heading === false ? null : <h1>{heading ?? title}</h1>}
          {children}
        </main>
        <Footer links={here} />
      </body>
    </html>
  );
}

/**
 * The dashboard's headers: html.ts's (no framing, no caching, no referrer, no
 * sniffing) with a CSP that lets the page load its own assets and nothing
 * inline: scripts, styles, images and fetches from this origin only.
 */
export const DASHBOARD_HEADERS: Readonly<Record<string, string>> = {
  'x-frame-options': 'DENY',
  'content-security-policy': [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; '),
  'cache-control': 'no-store',
  pragma: 'no-cache',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
};

/** Sends a rendered page with the dashboard's headers. */
export function sendPage(reply: FastifyReply, page: VNode, status = 200): FastifyReply {
  return reply.code(status).headers(DASHBOARD_HEADERS).type('text/html; charset=utf-8').send(`<!doctype html>${render(page)}`);
}
