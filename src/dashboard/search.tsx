import type { FastifyInstance, preHandlerHookHandler } from 'fastify';
import { type Found, findById } from '../usecases/search.ts';
import { type DashboardDeps } from './context.ts';
import { Shell, sendPage } from './layout.tsx';

// Search: the shell's box sends the typed id here; the id's page opens (303)
// when the person's organization holds it, or a page says "Nothing found for
// …" (an id of another organization is nothing found, never a hint). The
// addresses of the families' pages follow docs/dashboard.md:
// /dashboard/<family>/<id>.

const enc = encodeURIComponent;

/** Where each kind of thing lives in the dashboard. */
export function pageOf(f: Found): string {
  switch (f.kind) {
    case 'tool_call':
      return `/dashboard/tool-calls/${enc(f.id)}`;
    case 'session':
      return `/dashboard/sessions/${enc(f.id)}`;
    case 'mandate':
      return `/dashboard/mandates/${enc(f.id)}`;
    case 'consumer':
      return `/dashboard/consumers/${enc(f.id)}`;
    case 'webhook_endpoint':
      return `/dashboard/webhooks/${enc(f.id)}`;
    case 'connection':
      return `/dashboard/connections/${enc(f.id)}`;
    case 'approval':
      return `/dashboard/approvals/${enc(f.id)}`;
    case 'policy':
      return `/dashboard/policies/${enc(f.id)}`;
    case 'mcp_server':
      return `/dashboard/mcp-servers/${enc(f.id)}`;
    case 'mcp_call':
      return `/dashboard/mcp-servers/${enc(f.parent ?? '')}#${enc(f.id)}`;
    case 'counterparty':
      return `/dashboard/memory/${enc(f.id)}`;
    case 'api_key':
      return `/dashboard/usage#${enc(f.id)}`;
    case 'agent':
      return `/dashboard/agents/${enc(f.id)}`;
    case 'event':
      // The audit explorer on the event's day, its entry first.
      return `/dashboard/audit?from=${enc(f.day ?? '')}&to=${enc(f.day ?? '')}&before=${Number(f.id) + 1}#verify-${enc(f.id)}`;
  }
}

export async function searchRoutes(app: FastifyInstance, deps: DashboardDeps, signedIn: preHandlerHookHandler): Promise<void> {
  app.get('/dashboard/search', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    const raw = (req.query as Record<string, unknown> | undefined)?.q;
    const q = (typeof raw === 'string' ? raw : '').trim().slice(0, 200);
    const found = q ? await findById(deps.db, person.orgId, q) : undefined;
    if (found) return reply.redirect(pageOf(found), 303);
    return sendPage(
      reply,
      <Shell person={person} title="Search" active="search" path="/dashboard/search">
        {q ? (
          <p id="nothing-found">
            Nothing found for <code>{q}</code> in this organization. Check the id (copy it whole, with its prefix such as <code>tc_</code>, <code>ses_</code> or <code>mdt_</code>), or switch to the organization that holds it.
          </p>
        ) : (
          <p id="search-hint">Type or paste an id in the box above: a tool call, a session, a mandate, a consumer, a webhook endpoint, a connection, an approval, a policy, an MCP server or paid call, a counterparty, an API key, or an agent's handle.</p>
        )}
      </Shell>,
      q ? 404 : 200,
    );
  });
}
