import { type Column, EmptyState, Table } from './components.tsx';

// A chart of figures per UTC day, one line per series (assets/series-chart.js
// draws it with uPlot), with the same figures as a table beside it: what a
// browser without JavaScript, or a screen reader, reads. Used by Usage and
// MCP servers.

export type ChartSeries = { label: string; /** Per day, an integer as a decimal string ('0' when none). */ values: string[] };

/** The last `n` UTC days up to `now`'s, oldest first. */
export function lastDays(now: Date, n: number): string[] {
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  return Array.from({ length: n }, (_, i) => new Date(today - (n - 1 - i) * 86_400_000).toISOString().slice(0, 10));
}

/** Rows (day, series name, value) spread over `days`, at most `max` series (the largest first), the rest summed as "others". */
export function seriesOf<R>(rows: readonly R[], days: readonly string[], name: (r: R) => string, value: (r: R) => string, day: (r: R) => string, max = 5): ChartSeries[] {
  const by = new Map<string, Map<string, bigint>>();
  for (const r of rows) {
    const m = by.get(name(r)) ?? new Map<string, bigint>();
    m.set(day(r), (m.get(day(r)) ?? 0n) + BigInt(value(r)));
    by.set(name(r), m);
  }
  const total = (m: Map<string, bigint>) => [...m.values()].reduce((a, b) => a + b, 0n);
  const sorted = [...by.entries()].sort((a, b) => (total(b[1]) > total(a[1]) ? 1 : total(b[1]) < total(a[1]) ? -1 : a[0].localeCompare(b[0])));
  const kept = sorted.slice(0, max);
  const rest = sorted.slice(max);
  if (rest.length > 0) {
    const others = new Map<string, bigint>();
    for (const [, m] of rest) for (const [d, v] of m) others.set(d, (others.get(d) ?? 0n) + v);
    kept.push([`${rest.length} others`, others]);
  }
  return kept.map(([label, m]) => ({ label, values: days.map((d) => String(m.get(d) ?? 0n)) }));
}

type Props = { id: string; title: string; empty: string; days: readonly string[]; series: readonly ChartSeries[]; digits: number; format: (v: string) => string; describe: string };

export function SeriesChart({ id, title, empty, days, series, digits, format, describe }: Props) {
  const rows = days.map((day, i) => ({ day, i })).filter(({ i }) => series.some((s) => s.values[i] !== '0'));
  const columns: Column<{ day: string; i: number }>[] = [{ label: 'Day (UTC)', cell: (r) => r.day }, ...series.map((s) => ({ label: s.label, cell: (r: { i: number }) => format(s.values[r.i]!), numeric: true }))];
  return (
    <section aria-labelledby={`${id}-title`} class="panel">
      <h2 id={`${id}-title`}>{title}</h2>
      {rows.length === 0 ? (
        <EmptyState title={empty} />
      ) : (
        <>
          <div class="chart" id={`${id}-chart`} data-series-chart={`${id}-data`} role="img" aria-label={`${describe}; the table below has the figures.`} />
          <Table caption={`${title}, days with any`} columns={columns} rows={rows} id={`${id}-table`} />
          {/* The chart reads its points from here (a JSON data block is not a script: the CSP allows it). */}
          <script type="application/json" id={`${id}-data`} dangerouslySetInnerHTML={{ __html: JSON.stringify({ days, digits, series }).replace(/</g, '\\u003c') }} />
        </>
      )}
    </section>
  );
}
