// Every limit of the service in one place. Units are named last.

/** Event store: a stream name is a short identifier, not a document. */
export const STREAM_NAME_MAX_CHARS = 200;
/** Event store: an event type is a dotted lowercase name. */
export const EVENT_TYPE_MAX_CHARS = 100;
/** Event store: the most events one append may carry. */
export const APPEND_MAX_EVENTS = 10_000;
/**
 * Event store: the largest append either store accepts, counted as EventStoreDB
 * counts it (UTF-8 bytes of data and metadata plus twice the event type's
 * length, summed over the events of the append): EventStoreDB's default
 * MaxAppendSize. EVENTSTORE_MAX_APPEND_BYTES sets another value (to match a
 * server configured otherwise), up to APPEND_MAX_BYTES_CEILING.
 */
export const APPEND_MAX_BYTES = 1_048_576;
export const APPEND_MAX_BYTES_CEILING = 16_777_216;
/**
 * Event store: the room an event of any stream the audit chain seals must
 * leave below the append limit for its entry (the entry carries the event's
 * data as its payload, plus an envelope, hashes and the source's address: a
 * few hundred bytes to ~1.5 KB). An event without that room could be
 * acknowledged and never sealed.
 */
export const SEAL_HEADROOM_BYTES = 16_384;
/** Event store: the smallest append limit the service can be set to (events must still fit beside their seal's headroom). */
export const APPEND_MAX_BYTES_FLOOR = 4 * SEAL_HEADROOM_BYTES;

/** Group commit: the most appends coalesced into one transaction. */
export const GROUP_COMMIT_MAX_APPENDS = 512;
/** Group commit: the most events written by one transaction (a single larger append still goes alone). */
export const GROUP_COMMIT_MAX_EVENTS = 4_096;
/** Folded stream states the command handler keeps per decider (least recently used dropped first). */
export const STATE_CACHE_MAX_STREAMS = 20_000;

/** Reads: default and maximum page of a readAll / readStream call. */
export const READ_PAGE_DEFAULT = 500;
export const READ_PAGE_MAX = 10_000;

/** Subscriptions: how long a caught-up subscriber sleeps without a notification before polling. */
export const SUBSCRIPTION_POLL_MS = 500;
/** Subscriptions: back-off after a transport error before resubscribing. */
export const SUBSCRIPTION_RETRY_MS = 250;

/** Postgres pool size of the service. */
export const PG_POOL_MAX = 10;

/** HTTP: largest request body. */
export const HTTP_BODY_MAX_BYTES = 1_048_576;
/** Rate limit per API key: a token bucket of this capacity, refilled at this rate. */
export const RATE_LIMIT_BURST = 200;
export const RATE_LIMIT_PER_SECOND = 100;
/** Idempotency keys: 1..255 visible ASCII characters, remembered this long. */
export const IDEMPOTENCY_KEY_MAX_CHARS = 255;
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/** A request still pending after this long was cut short (its process died): its outcome is unknown. */
export const IDEMPOTENCY_PENDING_MAX_MS = 10 * 60 * 1000;
/** Projects list (spec Part 8). */
export const PROJECTS_LIST_DEFAULT = 50;
export const PROJECTS_LIST_MAX = 100;

/** OAuth (spec Part 4.1, Part 8): client_name is truncated to this many characters. */
export const OAUTH_CLIENT_NAME_MAX_CHARS = 256;
/** OAuth: redirect URIs per client, and the length of each. */
export const OAUTH_REDIRECT_URIS_MAX = 10;
export const OAUTH_REDIRECT_URI_MAX_CHARS = 2_000;
/** OAuth: an authorization code lives this long and is single use. */
export const OAUTH_CODE_TTL_MS = 60_000;
/** OAuth: access token lifetime (expires_in) and refresh token lifetime. */
export const OAUTH_ACCESS_TTL_SECONDS = 3_600;
export const OAUTH_REFRESH_TTL_MS = 30 * 24 * 60 * 60 * 1000;
/** OAuth: a consent page's handle is usable this long after the page was served. */
export const OAUTH_CONSENT_TTL_MS = 10 * 60 * 1000;
/** OAuth: state is echoed verbatim; cap its length. */
export const OAUTH_STATE_MAX_CHARS = 1_000;
/** OAuth: requests per client address on register, authorize and token (each its own bucket). */
export const OAUTH_RATE_BURST = 60;
export const OAUTH_RATE_PER_SECOND = 1;
/** OAuth: failed API key pastes on the consent page per client address in a window (brute-force guard, counted in PostgreSQL). */
export const OAUTH_KEY_PASTE_MAX_FAILURES = 10;
export const OAUTH_KEY_PASTE_WINDOW_MS = 15 * 60 * 1000;
/** Connections (spec Part 8): display_name, and connection_metadata on create and metadata update. */
export const DISPLAY_NAME_MAX_CHARS = 128;
export const CONNECTION_METADATA_MAX_KEYS = 64;
export const CONNECTION_METADATA_MAX_BYTES = 32_768;
/** Inbound provider webhooks: largest body, and how far a delivery's timestamp may be from now. */
export const INBOUND_WEBHOOK_MAX_BYTES = 262_144;
export const INBOUND_WEBHOOK_TOLERANCE_SECONDS = 300;
/** EventStoreDB: attempts of one call on transport errors (unavailable, deadline, not leader), with exponential back-off. */
export const ESDB_RETRY_ATTEMPTS = 6;
export const ESDB_RETRY_BASE_MS = 100;
export const ESDB_RETRY_MAX_MS = 5_000;
/**
 * Browser worker (signup runs, hosted connect): contexts this instance's worker
 * holds at once (BROWSER_MAX_CONTEXTS), and the share one organization is
 * guaranteed across instances when others want contexts too (BROWSER_MAX_CONTEXTS_PER_ORG);
 * alone, an organization may use them all.
 */
export const BROWSER_MAX_CONTEXTS = 4;
export const BROWSER_MAX_CONTEXTS_PER_ORG = 2;
/** A hosted-connect start that finds no browser context free waits this long for one, then answers 503 `browser_capacity` with Retry-After. */
export const HOSTED_CONNECT_QUEUE_WAIT_MS = 20_000;
/** A context's row in browser_slots older than this is not counted toward its organization's share (left by an instance that died; no context lives this long). */
export const BROWSER_SLOT_MAX_AGE_MS = 45 * 60 * 1000;
/** Browser signup runs: how long a run waits queued for a context (by the app's clock) before it fails with `capacity`. */
export const SIGNUP_QUEUE_WAIT_MS = 2 * 60 * 1000;
/** Browser state across instances: how long a request forwarded to the instance holding the context may take to answer before that instance counts as gone. */
export const BROWSER_FORWARD_TIMEOUT_MS = 30_000;
/** SHUTDOWN_DELAY_MS at most: readiness failing with the listener open longer than this outlasts any orchestrator's grace period. */
export const SHUTDOWN_DELAY_MAX_MS = 5 * 60 * 1000;
/**
 * Hosted-browser connect: an open context closes this long after its live view
 * was closed, or after it was opened with nobody watching or typing; and after
 * the lifetime in all. A connected viewer keeps it open.
 */
export const HOSTED_CONNECT_IDLE_MS = 60_000;
export const HOSTED_CONNECT_MAX_MS = 30 * 60 * 1000;
/** Hosted-browser connect: the largest text one live-view input carries (a pasted password fits). */
export const HOSTED_INPUT_TEXT_MAX_CHARS = 512;
/** Tool input validation: compiled JSON Schemas kept (least recently used dropped first). */
export const JSON_SCHEMA_CACHE_MAX = 1_000;
/** Tool input validation: the longest string a schema `pattern` is matched against (linear-time engine; a longer string fails the pattern). */
export const JSON_SCHEMA_PATTERN_INPUT_MAX_CHARS = 65_536;

/** Snapshots: a stream's folded state is snapshotted once this many events pass its last snapshot (or its start). */
export const SNAPSHOT_EVERY_EVENTS = 1_000;

/** Dashboard sessions: closed after this long without a request (idle) and this long after sign-in (absolute). */
export const DASHBOARD_SESSION_IDLE_MS = 2 * 60 * 60 * 1000;
export const DASHBOARD_SESSION_MAX_MS = 12 * 60 * 60 * 1000;
/** A session's last-seen time is written at most this often (not on every page). */
export const DASHBOARD_SESSION_TOUCH_MS = 60_000;
/** Dashboard sign-in codes: valid this long, this many tries, then locked. */
export const SIGNIN_CODE_TTL_MS = 10 * 60 * 1000;
export const SIGNIN_CODE_MAX_TRIES = 5;
/** Codes asked per e-mail address, and per client address, across instances: a burst, refilled over 15 minutes. */
export const SIGNIN_PER_ADDRESS_BURST = 5;
export const SIGNIN_PER_CLIENT_BURST = 20;
export const SIGNIN_REFILL_WINDOW_S = 15 * 60;
/** Passkeys a person may hold. */
export const PASSKEYS_MAX = 20;
/** WebAuthn ceremonies: a challenge is good for this long. */
export const PASSKEY_CHALLENGE_TTL_MS = 5 * 60 * 1000;
/** Home: the days of the spends chart (today included). */
export const HOME_SPEND_DAYS = 14;
/** A directed-pay consent token is good this long after it is minted (issue 58). */
export const DIRECTED_CONSENT_TTL_MS = 30 * 60 * 1000;
/** A consent's mandate lives at most this long (its mandate_ttl_seconds). */
export const DIRECTED_MANDATE_TTL_MAX_SECONDS = 366 * 24 * 60 * 60;
/** Currency slots one mandate may hold. */
export const MANDATE_SLOTS_MAX = 8;
