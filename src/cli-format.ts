// How the CLI shows things to a person at a terminal (a pipe gets JSON lines).

type Row = { name: string; kind: string; version: number; position: string; status: string; error: string | null; head: string; caught_up: boolean };

/** Positions are zero-padded for ordering; a person reads the number. */
const readable = (position: string) => (position === '' ? '0' : position.replace(/\b0+(?=\d)/g, ''));

/** `projections status` as an aligned table: name, kind, version, position / head, status. */
export function projectionsTable(rows: readonly Row[]): string {
  const head = rows[0]?.head ?? '';
  const cells = rows.map((r) => [r.name, r.kind, String(r.version), `${readable(r.position)} / ${readable(r.head)}`, r.status === 'running' && r.caught_up ? 'caught up' : r.status === 'running' ? 'behind' : `${r.status}${r.error ? `: ${r.error}` : ''}`]);
  const all = [['NAME', 'KIND', 'VERSION', 'POSITION / HEAD', 'STATUS'], ...cells];
  const widths = all[0]!.map((_, i) => Math.max(...all.map((c) => c[i]!.length)));
  const lines = all.map((c) => c.map((v, i) => (i === c.length - 1 ? v : v.padEnd(widths[i]!))).join('  '));
  return `${lines.join('\n')}\n${rows.length} projections and reactors; log head ${readable(head)}\n`;
}
