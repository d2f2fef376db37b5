import type { AddressInfo } from 'node:net';
import t from 'tap';
import { SMTPServer } from 'smtp-server';
import { SmtpMailer } from '../../src/adapters/mail/smtp.ts';

// The SMTP mail adapter against a real SMTP peer on loopback (smtp-server):
// the message arrives with its sender, recipient, subject and text; with
// credentials in SMTP_URL it authenticates; a refused recipient is an error
// the caller sees.

type Got = { from: string; to: string[]; raw: string; user: string | undefined };
const got: Got[] = [];
const server = new SMTPServer({
  authOptional: true,
  disabledCommands: ['STARTTLS'],
  allowInsecureAuth: true,
  logger: false,
  onAuth(auth, _session, cb) {
    if (auth.username === 'mailer' && auth.password === 'p@ss word') return cb(null, { user: 'mailer' });
    return cb(new Error('bad credentials'));
  },
  onRcptTo(address, _session, cb) {
    if (address.address.endsWith('@refused.example')) return cb(new Error('no such mailbox'));
    cb();
  },
  onData(stream, session, cb) {
    let raw = '';
    stream.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    stream.on('end', () => {
      got.push({ from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '', to: session.envelope.rcptTo.map((r) => r.address), raw, user: session.user as string | undefined });
      cb();
    });
  },
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
t.teardown(() => new Promise<void>((r) => server.close(() => r())));
const port = (server.server.address() as AddressInfo).port;

t.test('a message arrives as sent', async (t) => {
  const mailer = new SmtpMailer(`smtp://127.0.0.1:${port}`, 'Agent Ledger <no-reply@ledger.example>');
  t.teardown(() => mailer.close());
  await mailer.send({ to: 'ana@example.com', subject: 'Your dashboard sign-in code', text: 'Your sign-in code is 123456.', code: '123456' });
  const m = got.at(-1)!;
  t.equal(m.from, 'no-reply@ledger.example');
  t.same(m.to, ['ana@example.com']);
  t.match(m.raw, /Subject: Your dashboard sign-in code/);
  t.match(m.raw, /Your sign-in code is 123456\./);
  t.equal(m.user, undefined);
});

t.test('credentials in the URL authenticate', async (t) => {
  const mailer = new SmtpMailer(`smtp://mailer:${encodeURIComponent('p@ss word')}@127.0.0.1:${port}`, 'no-reply@ledger.example');
  t.teardown(() => mailer.close());
  await mailer.send({ to: 'bia@example.com', subject: 's', text: 't' });
  t.equal(got.at(-1)!.user, 'mailer');
});

t.test('a refused recipient is an error', async (t) => {
  const mailer = new SmtpMailer(`smtp://127.0.0.1:${port}`, 'no-reply@ledger.example');
  t.teardown(() => mailer.close());
  await t.rejects(mailer.send({ to: 'nobody@refused.example', subject: 's', text: 't' }));
});
