// The mail port: how the service sends a person an e-mail (dashboard sign-in
// codes). Two adapters: the sandbox outbox (the embedded default and tests:
// the sandbox providers' /_sandbox/outbox, a local mail catcher) and SMTP
// (SMTP_URL, through nodemailer). Neither logs a message's text.

export type MailMessage = {
  to: string;
  subject: string;
  text: string;
  /** The one-time code the message carries (the sandbox outbox shows it apart, as its signup codes). */
  code?: string;
};

export interface Mailer {
  send(message: MailMessage): Promise<void>;
}

/** No mail configured: refuses, so the sender's error path (a log line without the message) says so. */
export class UnconfiguredMailer implements Mailer {
  async send(): Promise<void> {
    throw new Error('no mail adapter configured: set SMTP_URL, or run the sandbox providers');
  }
}
