import { businessEventTypes } from '../../../events/index.ts';

// The prose of the reference (/docs): the introduction a newcomer reads first,
// the tags in a reading order with what each family is for, and the event
// catalogue as a section of its own. The schemas say the shapes; this says
// how to use them.

export const PRODUCT = 'Agent Ledger API';

export const INTRODUCTION = `The ledger behind agent commerce: organizations, projects and API keys; consumers, mandates and the agents that spend under them; payments by Pix, x402 (USDC) and bank consents; monetized MCP servers; and a hash-linked audit chain over every event. Every change is an event in an append-only log; a 2xx to a write means its events are durable, sealed in the audit chain and visible to every read.

The machine-readable contract is [\`/openapi.json\`](/openapi.json) (the same document at \`/v1/openapi.json\`).

## Authentication

Three credentials, each for its own part of the API. Every operation below names the one it takes.

| Credential | Send | Where |
|---|---|---|
| API key | \`Authorization: Bearer sk_test_…\` (or \`sk_live_…\`) | \`/v1\`: the resources of an organization. \`x-svc-project: <project id>\` picks a project; the default project without it. |
| Platform secret + acting user | \`Authorization: Bearer <platform secret>\` and \`x-svc-user: <user id>\` | The service-auth subtree: API keys, members, organizations. The secret is not issued to callers: people use the dashboard. An API key there answers 401. |
| OAuth access token | \`Authorization: Bearer <token>\` | \`/v1\`, for remote clients (MCP clients, IDEs): discover at \`/.well-known/oauth-authorization-server\`, register at \`POST /oauth/register\`, send the person to \`GET /oauth/authorize\` (PKCE S256), exchange at \`POST /oauth/token\`. The token acts as the pasted key with the granted scopes. |

A key's scopes default to \`["*"]\`; each operation names the scope it needs in \`x-scope\` (\`<family>:read\` or \`<family>:write\`; a write scope also reads).

## Environments

Every key, project and record is \`test\` or \`live\`, fixed at creation. A \`sk_test_\` key settles on test networks (Base Sepolia, the sandbox bank and PSP) and sees test records only; a \`sk_live_\` key moves real money and sees live records only. Build against test keys; switch the key, not the code.

## Errors

Most errors are the standard envelope; the specification fixes a few exceptions. Tell them apart by whether \`error\` is a string. Quote the \`x-request-id\` response header when asking for help (it equals \`request_id\` where the body has one).

| When | Status | Body |
|---|---|---|
| Most errors | 4xx / 5xx | \`{"error": {"code": "slug_conflict", "message": "…", "details": {…}}, "request_id": "req_…"}\` |
| Missing, malformed or revoked credential | 401 | \`{"error": "unauthorized"}\`; which mistake it was is in \`WWW-Authenticate\` |
| Key lacks the scope | 403 | \`{"error": "forbidden", "message": "…", "status": 403}\` |
| Account role too low | 403 | \`{"error": "insufficient_role", "required": "admin"}\` |
| Policy denial (budget included) | 403 | \`{"reason": "budget_exceeded", "ruleType": "…", "ruleId": "…"}\`, plus \`approval_id\` and \`expires_at\` when an approval was opened |
| Rate limit | 429 | \`{"error": "rate_limited", "message": "…", "limit": 200, "refill_per_second": 100, "remaining": 0, "retry_after_seconds": 1}\` and \`Retry-After\` |
| Project resolution failure | 500 | \`{"error": "project_resolution_failed"}\` |
| OAuth endpoints | 400 / 401 | \`{"error": "invalid_grant", "error_description": "…"}\` (RFC 6749) |
| Provider connection check | 4xx / 5xx | \`{"ok": false, "error": "credential_rejected", …}\` |
| Tool-call status ids | 400 / 404 | \`{"error": "not_found", "message": "…"}\`, no \`request_id\` |

Each operation lists the statuses it can answer and, for each, its error codes and body.

## Idempotency

Writes take an \`Idempotency-Key\` header (1–255 visible ASCII characters), scoped to the credential's organization and environment and remembered for 24 hours. A repeat with the same method, path and body returns the first response with \`idempotent-replayed: true\`; the same key on another request answers 409 \`idempotency_key_reused\`; a repeat while the first still runs answers 409 \`idempotency_request_in_progress\`. A 503 \`write_outcome_unknown\` (\`details.retry_safe: false\`) means the write may have landed: read the resource before repeating.

## Pagination

Lists answer newest first. Cursor lists answer \`{data, next_cursor, has_more}\`: pass \`next_cursor\` as \`cursor\` for the next page (opaque; anything else is 400 \`invalid_query\`). Older lists take \`limit\` and \`offset\`. Each list states its default and maximum \`limit\`.

## Rate limits

Per API key, a token bucket: a burst of 200 requests, refilled at 100 per second, shared by every instance of the service. A refusal is the 429 above, with \`Retry-After\` in seconds.

## Events and webhooks

Webhook endpoints subscribe to event types; the full list is the [event catalogue](#tag/event-catalogue) (also \`x-event-types\` in the document). Deliveries are signed with Standard Webhooks headers (\`webhook-id\`, \`webhook-timestamp\`, \`webhook-signature\`).

More on each topic: \`docs/api.md\` in the repository.`;

/** Tags in reading order, grouped, each with what its family is for. */
export const TAG_GROUPS: ReadonlyArray<{ name: string; tags: ReadonlyArray<readonly [tag: string, description: string]> }> = [
  {
    name: 'Getting started',
    tags: [
      ['bootstrap', 'Organizations, their members and API keys, on the service-auth subtree (platform secret and `x-svc-user`). Start here to get a key.'],
      ['projects', 'Projects split an organization\'s records; every key acts in one (its own, or the one `x-svc-project` names, or the default).'],
      ['platform', 'Health, readiness and the service\'s own facts; no credential.'],
    ],
  },
  {
    name: 'Spending',
    tags: [
      ['consumers', 'The people an agent acts for, with their wallets and balances.'],
      ['agents', 'Agents: keys an agent signs with, rotated and revoked.'],
      ['mandates', 'What an agent may spend for a consumer: caps, currencies, purpose, expiry; each spend is checked against them.'],
      ['policies', 'Organization rules evaluated on every spend (budgets, allow and deny lists); a denial may open an approval.'],
      ['approvals', 'Spends a policy held for a person to allow or deny.'],
      ['sandbox', 'Test-environment helpers: simulate payments and funding. Refused for live keys.'],
    ],
  },
  {
    name: 'Payment rails',
    tags: [
      ['pix', 'Brazil\'s instant payments: accounts, keys, charges (BR Codes) and receipts, through the PSP adapter.'],
      ['bank-consents', 'Open Finance consents a consumer gives at their bank, and the accounts read under them.'],
      ['facilitator', 'x402: verify and settle USDC transfer authorizations (EIP-3009) on Base.'],
      ['cart', 'Hosted-browser connect to shopping merchants: a person logs in on a live view, the agent gets a connection.'],
    ],
  },
  {
    name: 'Tools and providers',
    tags: [
      ['sessions', 'An agent\'s working session: its servers, tool calls, logs and MCP endpoint.'],
      ['tool-calls', 'One tool call and the status of its payment and verification (also as event streams).'],
      ['providers', 'The provider catalogue and what each needs to connect.'],
      ['connections', 'A consumer\'s connection to a provider (API key, OAuth, hosted browser) and its checks.'],
      ['mcp-servers', 'Monetized MCP servers an organization publishes: tools, prices and platform fees.'],
      ['mcp-gateway', 'The paid MCP gateway (`/mcp/{slug}`): a tool call paid with x402.'],
      ['commerce-memory', 'What the ledger remembers of past commerce: counterparties, purchases and insights.'],
    ],
  },
  {
    name: 'Integrations',
    tags: [
      ['webhooks', 'Endpoints subscribed to event types, their signed deliveries, retries, dead letters and replays.'],
      ['oauth', 'OAuth 2.0 for remote clients: discovery, dynamic registration, the consent page and tokens.'],
      ['audit', 'The hash-linked audit chain: events, signed checkpoints, proofs, verification and incidents.'],
      ['event-catalogue', eventCatalogue()],
    ],
  },
];

/** Every subscribable event type, by family (the part before the first dot). */
export function eventCatalogue(): string {
  const byFamily = new Map<string, string[]>();
  for (const t of businessEventTypes) {
    const family = t.split('.')[0]!;
    byFamily.set(family, [...(byFamily.get(family) ?? []), t]);
  }
  const rows = [...byFamily].map(([family, types]) => `| ${family} | ${types.map((t) => `\`${t}\``).join(', ')} |`);
  return [
    `Every event type a webhook endpoint can subscribe to (${businessEventTypes.length} types), by family. A delivery posts the stored event \`{id, source, event_type, payload, received_at}\`.`,
    '',
    '| Family | Event types |',
    '|---|---|',
    ...rows,
  ].join('\n');
}

export const TAG_DISPLAY: Record<string, string> = { 'event-catalogue': 'Event catalogue', 'bank-consents': 'Bank consents', 'tool-calls': 'Tool calls', 'mcp-servers': 'MCP servers', 'mcp-gateway': 'MCP gateway', 'commerce-memory': 'Commerce memory', oauth: 'OAuth', pix: 'Pix' };
