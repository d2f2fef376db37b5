// The consent pages' scopes in words a person reads (issue 60, the consent
// page): each scope code of the vocabulary (`*`, `<family>:read`,
// `<family>:write`, `<family>:*`; src/http/oauth/oauth-common.ts) as a
// sentence, the code kept beside it for whoever compares it with the request.

/** What each family of routes holds, as the object of "read" and "change". */
const FAMILY: Record<string, string> = {
  agents: 'agent identities and their signing keys',
  approvals: 'approvals of held calls',
  audit: 'the audit chain, its proofs and incidents',
  bank_consents: 'bank consents and the bank statements they read',
  commerce_memory: 'commerce memory: counterparties and negotiations',
  connections: 'provider connections and their credentials',
  consumers: 'consumers, their wallets and Pix accounts',
  facilitator: 'x402 payment authorizations',
  mandates: 'mandates and their cards',
  mcp: 'monetized MCP servers and their tools',
  pix: 'Pix keys, charges and payments',
  policies: 'policies on tool calls and payments',
  projects: 'projects and their settings',
  providers: 'the provider catalog',
  sessions: 'agent sessions and their tool calls',
  webhooks: 'webhook endpoints and their deliveries',
};

const family = (f: string) => FAMILY[f] ?? f.replaceAll('_', ' ');

/** A scope code as a sentence: `mandates:read` → "Read mandates and their cards". */
export function scopeSentence(scope: string): string {
  if (scope === '*') return 'Everything the API key can do, on every part of the account';
  const [f = '', access = ''] = scope.split(':');
  if (access === 'read') return `Read ${family(f)}`;
  if (access === 'write') return `Read and change ${family(f)}`;
  if (access === '*') return `Everything on ${family(f)}`;
  return scope;
}
