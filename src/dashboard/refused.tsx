import type { FastifyReply } from 'fastify';
import { type Active, PublicShell, Shell, sendPage } from './layout.tsx';
import type { Person } from './session.ts';

// The pages of a refusal: a form that failed the CSRF or origin check
// (nothing changed), an action above the person's role, and a page that
// does not exist.

export function refusedPage(reply: FastifyReply) {
  return sendPage(
    reply,
    <PublicShell title="This form could not be accepted" notice={{ text: 'Nothing was changed.', tone: 'error' }}>
      <p id="refused">The form was sent from another site, or it was open too long and lost its security token.</p>
      <p>
        Go back to the <a href="/dashboard">dashboard</a>, reload the page and try again.
      </p>
    </PublicShell>,
    403,
  );
}

export function roleRefusedPage(reply: FastifyReply, person: Person, needed: 'admin' | 'owner', active: Active = 'home') {
  return sendPage(
    reply,
    <Shell person={person} title="You cannot do this" active={active} notice={{ text: 'Nothing was changed.', tone: 'error' }}>
      <p id="role-refused">
        This needs the {needed} role in this organization or project; you are {person.role === 'admin' ? 'an admin' : `a ${person.role}`}. Ask an {needed === 'owner' ? 'owner' : 'admin or owner'} of your organization.
      </p>
    </Shell>,
    403,
  );
}

export function notFoundPage(reply: FastifyReply, path: string) {
  return sendPage(
    reply,
    <PublicShell title="There is no such page">
      <p id="not-found">
        Nothing in the dashboard lives at <code>{path}</code>. The link may be mistyped or out of date.
      </p>
      <p>
        Go to the <a href="/dashboard">dashboard's home</a>.
      </p>
    </PublicShell>,
    404,
  );
}
