import { HttpPsp } from './http-psp.ts';
import { type PixDeps, UnconfiguredPsp } from './port.ts';
import { SandboxPsp } from './sandbox-psp.ts';
import type { SandboxHome } from '../sandbox-home.ts';

// Pix configuration from the environment, read once at start:
//   SANDBOX_PSP=on|off (default on): the sandbox PSP on loopback, used by test keys.
//   PIX_PSP_URL, PIX_PSP_CLIENT_ID, PIX_PSP_CLIENT_SECRET, PIX_PSP_WEBHOOK_SECRET:
//   the live PSP, used by live keys; without them live Pix answers 501 not_wired.

export async function openPix(env: NodeJS.ProcessEnv, webhookBaseUrl: string, home?: SandboxHome): Promise<{ deps: PixDeps; stop(): Promise<void>; sandboxUrl: string | undefined }> {
  let sandbox: SandboxPsp | undefined;
  let sandboxPsp: HttpPsp | undefined;
  if ((env.SANDBOX_PSP ?? 'on') === 'on') {
    sandbox = new SandboxPsp(home ? { home } : {});
    const url = await sandbox.start();
    sandboxPsp = new HttpPsp('sandbox', { baseUrl: url, clientId: sandbox.clientId, clientSecret: sandbox.clientSecret, webhookSecret: sandbox.webhookSecret });
    await sandboxPsp.configureWebhook(`${webhookBaseUrl}/v1/pix/notifications/sandbox`);
  }
  const { PIX_PSP_URL: url, PIX_PSP_CLIENT_ID: id, PIX_PSP_CLIENT_SECRET: secret, PIX_PSP_WEBHOOK_SECRET: whsec } = env;
  const live = url && id && secret && whsec ? new HttpPsp('live', { baseUrl: url, clientId: id, clientSecret: secret, webhookSecret: whsec }) : new UnconfiguredPsp();
  return { deps: { sandbox: sandboxPsp, live }, stop: async () => sandbox?.stop(), sandboxUrl: sandbox?.url };
}
