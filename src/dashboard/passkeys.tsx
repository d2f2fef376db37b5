import type { FastifyInstance, FastifyReply, FastifyRequest, preHandlerHookHandler } from 'fastify';
import { Rejection } from '../eventstore/handler.ts';
import { authenticationOptions, registrationOptions, relyingParty, userHandleOf, verifyAuthentication, verifyRegistration } from '../adapters/passkeys/webauthn.ts';
import { addPasskey, keepChallenge, listPasskeys, type PasskeyView, removePasskey, takeChallenge, userEmail } from '../usecases/passkeys.ts';
import { Button, type Column, EmptyState, PostForm, Table, Time } from './components.tsx';
import { csrfOk, type DashboardDeps, flash, personRun, rejectionText } from './context.ts';
import { refusedPage } from './refused.tsx';
import { safeNext, type Person } from './session.ts';
import { startSession } from './sign-in.tsx';

// Passkeys: a signed-in person registers one (WebAuthn, the browser half in
// assets/passkey.js), lists and removes them on the account page; the sign-in
// page offers "sign in with a passkey". Adding and removing are events
// (user.passkey_added / user.passkey_removed), a passkey sign-in is
// user.signed_in with method "passkey". The ceremonies speak JSON.

const bodyOf = (req: FastifyRequest) => (typeof req.body === 'object' && req.body !== null ? (req.body as Record<string, unknown>) : {});
const str = (v: unknown, max: number) => (typeof v === 'string' && v.length <= max ? v : '');
const fail = (reply: FastifyReply, status: number, error: string) => reply.code(status).headers({ 'cache-control': 'no-store' }).send({ error });

/** The account page's passkey section: the list, remove buttons, and the add form (shown by passkey.js when the browser can). */
export function PasskeySection({ person, passkeys, now }: { person: Person; passkeys: PasskeyView[]; now: Date }) {
  const columns: Column<PasskeyView>[] = [
    { label: 'Name', cell: (p) => p.name },
    { label: 'Added', cell: (p) => <Time iso={p.addedAt} now={now} /> },
    {
      label: 'Remove',
      cell: (p) => (
        <PostForm action={`/dashboard/passkeys/${p.id}/remove`} csrf={person.csrfToken} inline>
          <Button kind="danger" small id={`remove-passkey-${p.id}`}>
            Remove<span class="visually-hidden"> {p.name}</span>
          </Button>
        </PostForm>
      ),
    },
  ];
  return (
    <div class="panel">
      <h2>Passkeys</h2>
      <p>A passkey signs you in with this device's lock (fingerprint, face or PIN) instead of a code.</p>
      {passkeys.length === 0 ? <EmptyState title="No passkeys yet." /> : <Table caption={`${passkeys.length} ${passkeys.length === 1 ? 'passkey' : 'passkeys'}`} columns={columns} rows={passkeys} id="passkeys" />}
      <div id="passkey-add-area" hidden>
        <div class="field">
          <label for="passkey-name">Name of the new passkey</label>
          <span class="hint" id="passkey-name-hint">
            Which device it is on, e.g. “work laptop”.
          </span>
          <input id="passkey-name" name="passkey-name" type="text" maxLength={100} aria-describedby="passkey-name-hint" value="" />
        </div>
        <button type="button" class="btn btn-primary" id="add-passkey">
          Add a passkey
        </button>
      </div>
    </div>
  );
}

export async function passkeyRoutes(app: FastifyInstance, deps: DashboardDeps, signedIn: preHandlerHookHandler): Promise<void> {
  const rpFor = (req: FastifyRequest) => relyingParty(deps.baseUrl, `${req.protocol}://${req.host}`);

  app.post('/dashboard/passkeys/options', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    if (!csrfOk(req, deps.baseUrl, person)) return fail(reply, 403, 'This request could not be accepted: reload the page and try again.');
    const existing = await listPasskeys(deps, person.userId);
    const options = await registrationOptions(rpFor(req), { id: person.userId, email: person.email }, existing);
    const challengeId = await keepChallenge(deps, options.challenge, person.userId);
    return reply.headers({ 'cache-control': 'no-store' }).send({ challenge_id: challengeId, options });
  });

  app.post('/dashboard/passkeys', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    if (!csrfOk(req, deps.baseUrl, person)) return fail(reply, 403, 'This request could not be accepted: reload the page and try again.');
    const b = bodyOf(req);
    const challenge = await takeChallenge(deps, str(b.challenge_id, 64), person.userId);
    if (!challenge) return fail(reply, 400, 'The passkey request expired: press “Add a passkey” again.');
    const key = await verifyRegistration(rpFor(req), b.response, challenge);
    if (!key) return fail(reply, 400, 'The passkey could not be verified: nothing was added. Try again.');
    const name = str(b.name, 100).trim() || 'Passkey';
    try {
      await addPasskey(personRun(deps, req, person), person.userId, { ...key, name });
    } catch (err) {
      if (!(err instanceof Rejection)) throw err;
      return fail(reply, 409, rejectionText(err));
    }
    flash(reply, `The passkey “${name}” is added: you can sign in with it next time.`);
    return reply.send({ redirect: '/dashboard/account' });
  });

  app.post('/dashboard/passkeys/:id/remove', { preHandler: signedIn }, async (req, reply) => {
    const person = req.person!;
    if (!csrfOk(req, deps.baseUrl, person)) return refusedPage(reply);
    const id = (req.params as { id: string }).id;
    const removed = /^pk_[A-Za-z0-9]{16}$/.test(id) && (await removePasskey(personRun(deps, req, person), person.userId, id));
    flash(reply, removed ? 'The passkey is removed: it no longer signs you in.' : 'That passkey was already removed.', removed ? 'ok' : 'error');
    return reply.redirect('/dashboard/account', 303);
  });

  app.post('/dashboard/sign-in/passkey/options', async (req, reply) => {
    if (!csrfOk(req, deps.baseUrl, null)) return fail(reply, 403, 'This request could not be accepted: reload the page and try again.');
    const options = await authenticationOptions(rpFor(req));
    const challengeId = await keepChallenge(deps, options.challenge, null);
    return reply.headers({ 'cache-control': 'no-store' }).send({ challenge_id: challengeId, options });
  });

  app.post('/dashboard/sign-in/passkey', async (req, reply) => {
    if (!csrfOk(req, deps.baseUrl, null)) return fail(reply, 403, 'This request could not be accepted: reload the page and try again.');
    const b = bodyOf(req);
    const refused = 'This passkey does not sign anyone in here: sign in with a code.';
    const challenge = await takeChallenge(deps, str(b.challenge_id, 64), null);
    if (!challenge) return fail(reply, 400, 'The sign-in expired: press “Sign in with a passkey” again.');
    const named = userHandleOf(b.response);
    if (!named) return fail(reply, 400, refused);
    const passkey = (await listPasskeys(deps, named.userId)).find((p) => p.credentialId === named.credentialId);
    const email = passkey ? await userEmail(deps.db, named.userId) : null;
    if (!passkey || !email || !(await verifyAuthentication(rpFor(req), b.response, challenge, passkey))) return fail(reply, 400, refused);
    if (!(await startSession(deps, req, reply, email, 'passkey', passkey.id, named.userId))) return fail(reply, 400, refused);
    flash(reply, 'You are signed in.');
    return reply.send({ redirect: safeNext(b.next) });
  });
}
