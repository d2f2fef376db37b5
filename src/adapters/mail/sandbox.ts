import type { Mailer, MailMessage } from './port.ts';

// The sandbox mail adapter: messages go into the sandbox providers' outbox
// (POST /_sandbox/mail on loopback), where a person reads them at
// <sandbox>/_sandbox/outbox.html and tests at /_sandbox/outbox?email=.
// Every instance posts to the same sandbox, so a code asked on one instance
// shows in the one outbox.

export class SandboxMailer implements Mailer {
  constructor(
    private readonly sandboxUrl: string,
    private readonly from: string,
  ) {}

  async send(m: MailMessage): Promise<void> {
    const r = await fetch(`${this.sandboxUrl}/_sandbox/mail`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ from: this.from, to: m.to, subject: m.subject, text: m.text, code: m.code ?? '' }),
      signal: AbortSignal.timeout(10_000),
    });
    if (r.status !== 204) throw new Error(`the sandbox outbox answered ${r.status}`);
  }
}
