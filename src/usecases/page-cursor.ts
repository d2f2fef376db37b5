// An opaque cursor for the dashboard's lists that grow newest first: the
// last row's time and id (a keyset, never an offset). A cursor this service
// did not give reads as none (the first page).

export const encodeCursor = (at: string, id: string) => Buffer.from(`${at}|${id}`).toString('base64url');

export function decodeCursor(c: string | undefined): { at: string; id: string } | undefined {
  if (!c || c.length > 400) return undefined;
  const [at, id, ...rest] = Buffer.from(c, 'base64url').toString('utf8').split('|');
  if (!at || !id || rest.length > 0 || Number.isNaN(Date.parse(at))) return undefined;
  return { at, id };
}

/** Rows fetched one beyond the page: the page and the next cursor (undefined on the last page). */
export function pageOf<R>(rows: R[], limit: number, key: (r: R) => [at: string, id: string]): { rows: R[]; next: string | undefined } {
  if (rows.length <= limit) return { rows, next: undefined };
  const page = rows.slice(0, limit);
  return { rows: page, next: encodeCursor(...key(page[page.length - 1]!)) };
}
