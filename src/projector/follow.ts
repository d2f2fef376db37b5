import type { BatchItem, EventStore, Position, RecordedEvent, SubscriptionItem } from '../eventstore/port.ts';

// Batches a catch-up subscription: yields whatever has arrived (at least one
// event, at most `max`), so followers write one transaction per batch while
// keeping latency low when the log is quiet.

export async function* batches(store: EventStore, after: Position, signal: AbortSignal, max = 500): AsyncGenerator<RecordedEvent[]> {
  const buffer: RecordedEvent[] = [];
  let wake: (() => void) | undefined;
  let pumpWake: (() => void) | undefined;
  let ended = false;
  let failure: unknown;
  // The subscription stops when the caller aborts or stops iterating, whichever is first.
  const local = new AbortController();
  const onAbort = () => local.abort();
  signal.addEventListener('abort', onAbort, { once: true });
  // One listener for the whole subscription (not one per wait): an abort wakes a waiting consumer.
  local.signal.addEventListener('abort', () => wake?.(), { once: true });
  const pump = (async () => {
    try {
      // Runs of events where the store offers them (one item per transaction or page), else event by event.
      const items = store.subscribeToAllBatches
        ? store.subscribeToAllBatches({ after, signal: local.signal })
        : mapItems(store.subscribeToAll({ after, signal: local.signal }));
      for await (const item of items) {
        if (item.kind !== 'events') continue;
        for (const e of item.events) buffer.push(e);
        wake?.();
        // Back-pressure: let the consumer drain before reading further.
        while (buffer.length >= max * 4 && !local.signal.aborted) await new Promise<void>((r) => (pumpWake = r));
      }
    } catch (err) {
      failure = err;
    } finally {
      ended = true;
      wake?.();
    }
  })();
  try {
    while (!signal.aborted) {
      if (buffer.length === 0) {
        if (ended || local.signal.aborted) break;
        await new Promise<void>((r) => (wake = r));
        wake = undefined;
        continue;
      }
      const batch = buffer.splice(0, max);
      pumpWake?.();
      yield batch;
    }
  } finally {
    local.abort();
    signal.removeEventListener('abort', onAbort);
    pumpWake?.();
    await pump.catch(() => {});
  }
  if (failure && !signal.aborted) throw failure;
}

async function* mapItems(items: AsyncIterable<SubscriptionItem>): AsyncGenerator<BatchItem> {
  for await (const item of items) yield item.kind === 'event' ? { kind: 'events', events: [item.event] } : item;
}
