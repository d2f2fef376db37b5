import { createTransport, type Transporter } from 'nodemailer';
import type { Mailer, MailMessage } from './port.ts';

// The SMTP mail adapter (SMTP_URL, e.g. smtps://user:pass@mail.example.com:465
// or smtp://127.0.0.1:2525), through nodemailer; MAIL_FROM is the sender.
// smtp:// upgrades with STARTTLS when the server offers it; smtps:// is TLS
// from the first byte.

export class SmtpMailer implements Mailer {
  private readonly transport: Transporter;

  constructor(
    smtpUrl: string,
    private readonly from: string,
    opts: { tlsRejectUnauthorized?: boolean } = {},
  ) {
    const u = new URL(smtpUrl);
    if (u.protocol !== 'smtp:' && u.protocol !== 'smtps:') throw new Error('SMTP_URL must be smtp:// or smtps://');
    const secure = u.protocol === 'smtps:';
    this.transport = createTransport({
      host: u.hostname.replace(/^\[|\]$/g, ''),
      port: u.port ? Number(u.port) : secure ? 465 : 587,
      secure,
      ...(u.username ? { auth: { user: decodeURIComponent(u.username), pass: decodeURIComponent(u.password) } } : {}),
      ...(opts.tlsRejectUnauthorized === false ? { tls: { rejectUnauthorized: false } } : {}),
      connectionTimeout: 10_000,
      greetingTimeout: 10_000,
      socketTimeout: 20_000,
      logger: false,
    });
  }

  async send(m: MailMessage): Promise<void> {
    await this.transport.sendMail({ from: this.from, to: m.to, subject: m.subject, text: m.text });
  }

  close(): void {
    this.transport.close();
  }
}
