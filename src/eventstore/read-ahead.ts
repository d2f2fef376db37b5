import { EventStoreError } from './port.ts';

// Reading a long stretch of the log one event at a time, for both stores:
// the next page is read while this one is handed out, and each row is
// decoded only when the reader reaches it. A page of undecoded rows is text;
// decoded, it is thousands of objects that outlive the young generation when
// a whole page is decoded up front (docs/performance.md, sixteenth round).

/**
 * Pages from `readPage` (given the last row of the page before), decoded row
 * by row, until `isLast` says a page was the last (an empty page always is).
 */
export async function* readAhead<R, E>(readPage: (last: R | undefined) => Promise<R[]>, isLast: (page: R[]) => boolean, decode: (row: R) => E | undefined): AsyncGenerator<E> {
  // A read ahead is observed at once: a reader that never comes back for it
  // (it stopped early and never closed this generator) leaves no rejection
  // unhandled; one that does still gets the error from its await.
  const ahead = (last: R | undefined) => {
    const p = readPage(last);
    p.catch(() => {});
    return p;
  };
  let next: Promise<R[]> | undefined = ahead(undefined);
  while (next) {
    const page: R[] = await next;
    next = page.length === 0 || isLast(page) ? undefined : ahead(page[page.length - 1]);
    for (const row of page) {
      const e = decode(row);
      if (e !== undefined) yield e;
    }
  }
}

/** Rows per page when the reader does not say: small enough that a page's rows die young. */
export const ITERATE_PAGE = 1000;

/** A reader's page size: a positive integer, at most `max`. */
export function iteratePage(pageSize: number | undefined, max: number): number {
  if (pageSize === undefined) return Math.min(ITERATE_PAGE, max);
  if (!Number.isInteger(pageSize) || pageSize < 1) throw new EventStoreError('invalid_event', 'pageSize must be a positive integer');
  return Math.min(pageSize, max);
}
