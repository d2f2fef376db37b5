// Every limit of the service in one place. Units are named last.

/** Event store: a stream name is a short identifier, not a document. */
export const STREAM_NAME_MAX_CHARS = 200;
/** Event store: an event type is a dotted lowercase name. */
export const EVENT_TYPE_MAX_CHARS = 100;
/** Event store: the most events one append may carry. */
export const APPEND_MAX_EVENTS = 10_000;
/** Event store: the largest serialized event (data + metadata). */
export const EVENT_MAX_BYTES = 1_048_576;

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
/** Projects list (spec Part 8). */
export const PROJECTS_LIST_DEFAULT = 50;
export const PROJECTS_LIST_MAX = 100;
