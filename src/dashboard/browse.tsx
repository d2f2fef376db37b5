import type { ComponentChildren } from 'preact';
import type { FastifyInstance, FastifyReply, FastifyRequest, preHandlerHookHandler } from 'fastify';
import { Rejection } from '../eventstore/handler.ts';
import { roleInProject } from '../usecases/team.ts';
import { atLeast, csrfOk, type DashboardDeps, flash, formField, rejectionText } from './context.ts';
import { type Active, Shell, sendPage } from './layout.tsx';
import { type Column, EmptyState, Table } from './components.tsx';
import { formatMinor } from './money.ts';
import { refusedPage, roleRefusedPage } from './refused.tsx';
import type { Person } from './session.ts';

// What the Agents, Consumers and Mandates pages share: a query value, the
// link to a list's older rows (a cursor, never an offset), the bar of a cap
// used and left, the not-found page, and the shape of every action (a POST
// from this origin with the CSRF token, the role checked, the use case run as
// the person, a notice, 303 back).

/** A query parameter of a request, or undefined. */
export function queryOf(req: FastifyRequest, name: string): string | undefined {
  const v = (req.query as Record<string, unknown>)[name];
  return typeof v === 'string' && v.length > 0 && v.length <= 300 ? v : undefined;
}

/**
 * The request's URL as the list page's: a region served alone (`?fragment=1`) links to the whole page, and a page
 * drawn as the answer to a form's POST names its own path (the POST's is no page).
 */
function pageUrl(req: FastifyRequest, path?: string): URL {
  const url = new URL(req.url, 'http://x');
  url.searchParams.delete('fragment');
  if (path) url.pathname = path;
  return url;
}

/** The link to a list's older rows: this page with `key` set to the next cursor (the page's other cursors kept). */
export function olderHref(req: FastifyRequest, key: string, next: string | null, path?: string): string | undefined {
  if (next === null) return undefined;
  const url = pageUrl(req, path);
  url.searchParams.set(key, next);
  return `${url.pathname}?${url.searchParams.toString()}`;
}

/** The link back to a list's newest rows (its cursor dropped), when the page shows older ones. */
export function newestHref(req: FastifyRequest, key: string, path?: string): string | undefined {
  const url = pageUrl(req, path);
  if (!url.searchParams.has(key)) return undefined;
  url.searchParams.delete(key);
  const qs = url.searchParams.toString();
  return `${url.pathname}${qs ? `?${qs}` : ''}`;
}

/** "Newest" and "Older" links of one list. */
export function ListPages({ req, cursor, next, label, path }: { req: FastifyRequest; cursor: string; next: string | null; label: string; path?: string }) {
  const newest = newestHref(req, cursor, path);
  const older = olderHref(req, cursor, next, path);
  if (!newest && !older) return null;
  return (
    <nav class="pagination" aria-label={`Pages of ${label}`}>
      {newest ? <a href={newest}>← Newest</a> : <span />}
      {older ? <a href={older}>Older →</a> : <span />}
    </nav>
  );
}

type ListProps<R> = {
  req: FastifyRequest;
  /** The table: caption, columns, rows, element id. */
  caption: string;
  columns: readonly Column<R>[];
  rows: readonly R[];
  id: string;
  /** What an empty list says (and what to do). */
  empty: string;
  children?: ComponentChildren;
  /** The list's cursor parameter, the next page's cursor, words for the links, the page's path when drawn on a POST's answer. */
  cursor: string;
  next: string | null;
  label: string;
  path?: string;
};

/** One page of a list: its table (or what an empty one says) and its "Newest"/"Older" links. */
export function BrowseList<R>({ req, caption, columns, rows, id, empty, children, cursor, next, label, path }: ListProps<R>) {
  return (
    <>
      {rows.length === 0 ? <EmptyState title={empty}>{children}</EmptyState> : <Table caption={caption} columns={columns} rows={rows} id={id} />}
      <ListPages req={req} cursor={cursor} next={next} label={label} {...(path ? { path } : {})} />
    </>
  );
}

/** A cap's use as a bar (a <meter>, read as "x of y") with the figures beside it in words. */
export function CapBar({ id, label, used, cap, currency }: { id: string; label: string; used: string; cap: string; currency: string }) {
  const left = (BigInt(cap) - BigInt(used)).toString();
  return (
    <div class="cap">
      <label for={id}>{label}</label>
      <meter id={id} class="cap-bar" min={0} max={Number(cap) || 1} value={Number(used)} low={Number(cap) * 0.75} high={Number(cap) * 0.9} optimum={0}>
        {formatMinor(used, currency)} of {formatMinor(cap, currency)}
      </meter>
      <p class="cap-figures">
        <span>
          Used <strong>{formatMinor(used, currency)}</strong>
        </span>{' '}
        <span>
          Left <strong>{formatMinor(left.startsWith('-') ? '0' : left, currency)}</strong>
        </span>{' '}
        <span>of {formatMinor(cap, currency)}</span>
      </p>
    </div>
  );
}

/** A labelled list of facts (a <dl>). */
export function Facts({ id, items }: { id?: string; items: readonly [string, ComponentChildren][] }) {
  return (
    <dl class="facts" id={id}>
      {items.map(([k, v]) => (
        <div>
          <dt>{k}</dt>
          <dd>{v}</dd>
        </div>
      ))}
    </dl>
  );
}

/** The not-found page of a family: "<holder> has no <what> with that id", the link back, 404, nothing changed. */
export function notFoundIn(reply: FastifyReply, person: Person, active: Active, what: string, back: { href: string; label: string }, holder = 'This project') {
  return sendPage(
    reply,
    <Shell person={person} title={`No such ${what}`} active={active} notice={{ text: 'Nothing was changed.', tone: 'error' }}>
      <p id="not-found">
        {holder} has no {what} with that id. See <a href={back.href}>{back.label}</a>.
      </p>
    </Shell>,
    404,
  );
}

/**
 * Whether the person is an admin or owner for a thing of a project (a project override raises or narrows the
 * organization role, except for owners), or of the whole organization (`null`: the organization role).
 */
export const adminOf = async (deps: DashboardDeps, person: Person, projectId: string | null) => atLeast(projectId ? await roleInProject(deps.db, person.userId, person.role, projectId) : person.role, 'admin');

/** Whether the person is an admin or owner in the current project. */
export const adminHere = (deps: DashboardDeps, person: Person) => adminOf(deps, person, person.projectId);

/**
 * A write's gate: from this origin with the session's CSRF token, by an admin or owner in the current project.
 * True when it refused (the refusal page is sent, nothing written): a boolean, since an async function returning
 * the (thenable) reply would resolve to undefined.
 */
export async function writeRefused(deps: DashboardDeps, req: FastifyRequest, reply: FastifyReply, active: Active): Promise<boolean> {
  const person = req.person!;
  if (!csrfOk(req, deps.baseUrl, person)) {
    refusedPage(reply);
    return true;
  }
  if (await adminHere(deps, person)) return false;
  roleRefusedPage(reply, person, 'admin', active);
  return true;
}

/** What an action's use case answers when it sent a page itself (a not-found page): no notice, no redirect. */
export const SENT = Symbol('sent');

type ActionOpts = {
  active: Active;
  /** Where the person comes back to (the page the form was on). */
  back: (req: FastifyRequest) => string;
  /** Runs the use case as the person; the notice to show (or SENT: it answered with a page of its own, e.g. not found). */
  act: (req: FastifyRequest, person: Person, reply: FastifyReply) => Promise<string | typeof SENT>;
  /** Words for a refusal the use case gave (else the decider's own). */
  refusal?: (r: Rejection) => string | undefined;
};

/**
 * A state-changing form of these pages: from this origin with the session's
 * CSRF token, by an admin or owner in the current project (else the role page,
 * nothing written), the use case run as the person, 303 back with a notice
 * (the refusal in words when the use case refused).
 */
export function action(app: FastifyInstance, deps: DashboardDeps, signedIn: preHandlerHookHandler, url: string, o: ActionOpts): void {
  app.post(url, { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    if (await writeRefused(deps, req, reply, o.active)) return reply;
    try {
      const notice = await o.act(req, person, reply);
      if (notice === SENT) return reply;
      flash(reply, notice);
    } catch (err) {
      if (!(err instanceof Rejection)) throw err;
      flash(reply, err.code === 'not_confirmed' ? err.message : (o.refusal?.(err) ?? rejectionText(err)), 'error');
    }
    return reply.redirect(o.back(req), 303);
  });
}

/** The box a person ticks to confirm an action that cannot be undone (checked by the route: unticked, nothing changes). */
export function ConfirmBox({ id, label }: { id: string; label: string }) {
  return (
    <div class="field checks">
      <label for={id}>
        <input type="checkbox" id={id} name="confirm" value="yes" /> {label}
      </label>
    </div>
  );
}

/** Whether the confirm box was ticked; else a refusal the notice says (nothing changes). */
export function confirmed(body: unknown, what: string): void {
  if (formField(body, 'confirm') !== 'yes') throw new Rejection('not_confirmed', `Tick “${what}” to confirm: nothing was changed.`);
}

