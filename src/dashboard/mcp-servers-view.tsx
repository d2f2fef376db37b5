import type { McpServerRow, McpToolRow } from '../usecases/mcp-servers.ts';
import type { DayEarning, PaidCall, SweepLine } from '../usecases/mcp-earnings.ts';
import { Badge, Button, Csrf, EmptyState, Pagination, Table, Time } from './components.tsx';
import { lastDays, SeriesChart } from './usage-chart.tsx';

// What the MCP servers pages show: servers, a server's tools with their
// prices (and the form that changes one), its paid calls, the earnings and
// platform fees per day, and the fee sweeps' transfers. USDC amounts are
// atomic units (6 decimals) shown in USDC by string arithmetic.

export const USDC_DIGITS = 6;

/** "1500000" → "1.50 USDC" (at least 2 decimals, up to 6, trailing zeros trimmed). */
export function usdc(atomic: string): string {
  const neg = atomic.startsWith('-');
  const digits = (neg ? atomic.slice(1) : atomic).replace(/^0+(?=\d)/, '').padStart(USDC_DIGITS + 1, '0');
  const whole = digits.slice(0, -USDC_DIGITS).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  const frac = digits.slice(-USDC_DIGITS).replace(/0+$/, '').padEnd(2, '0');
  return `${neg ? '-' : ''}${whole}.${frac} USDC`;
}

const short = (hex: string) => (hex.length > 14 ? `${hex.slice(0, 8)}…${hex.slice(-4)}` : hex);

export function ServerTable({ servers }: { servers: readonly McpServerRow[] }) {
  if (servers.length === 0)
    return (
      <EmptyState title="No MCP servers in this project.">
        <p>Register one through POST /v1/mcp-servers: its tools are then sold per call through the paying gateway.</p>
      </EmptyState>
    );
  return (
    <Table
      id="servers"
      caption="MCP servers of this project"
      rows={servers}
      columns={[
        { label: 'Server', cell: (s) => <a href={`/dashboard/mcp-servers/${encodeURIComponent(s.id)}`} data-server={s.id}>{s.name}</a> },
        { label: 'Slug', cell: (s) => <code>{s.slug}</code> },
        { label: 'Environment', cell: (s) => s.environment },
        { label: 'Tools', cell: (s) => s.tool_count, numeric: true },
        { label: 'Platform fee', cell: (s) => `${(s.platform_fee_bps / 100).toFixed(2)} %`, numeric: true },
        { label: 'Status', cell: (s) => (s.active ? <Badge tone="ok">active</Badge> : <Badge>inactive</Badge>) },
      ]}
    />
  );
}

export function EarningsChart({ id, rows, now, days }: { id: string; rows: readonly DayEarning[]; now: Date; days: number }) {
  const ds = lastDays(now, days);
  const by = new Map(rows.map((r) => [r.day, r]));
  const net = ds.map((d) => {
    const r = by.get(d);
    return r ? (BigInt(r.price_atomic) - BigInt(r.fee_atomic)).toString() : '0';
  });
  const fees = ds.map((d) => by.get(d)?.fee_atomic ?? '0');
  return (
    <SeriesChart
      id={id}
      title="Earnings and platform fees per day"
      empty={`No paid calls in the last ${days} days.`}
      days={ds}
      series={[
        { label: 'Earnings (after fees)', values: net },
        { label: 'Platform fees', values: fees },
      ]}
      digits={USDC_DIGITS}
      format={usdc}
      describe={`USDC earned by paid calls per day after platform fees, and the fees, the last ${days} days`}
    />
  );
}

export function ToolTable({ server, tools, csrf, mayChange }: { server: McpServerRow; tools: readonly McpToolRow[]; csrf: string; mayChange: boolean }) {
  return (
    <Table
      id="tools"
      caption="Tools and their prices, per call"
      rows={tools}
      columns={[
        { label: 'Tool', cell: (t) => <code>{t.tool_name}</code> },
        { label: 'Description', cell: (t) => t.description || '—' },
        { label: 'Price', cell: (t) => <span data-price={t.tool_name}>{usdc(t.price_atomic)}</span>, numeric: true },
        { label: 'Status', cell: (t) => (t.active ? <Badge tone="ok">on sale</Badge> : <Badge>off</Badge>) },
        ...(mayChange
          ? [
              {
                label: 'Change the price',
                cell: (t: McpToolRow) => (
                  <form method="post" action={`/dashboard/mcp-servers/${encodeURIComponent(server.id)}/tools/${encodeURIComponent(t.tool_name)}/price`} class="price-form">
                    <Csrf token={csrf} />
                    <label for={`price-${t.id}`} class="visually-hidden">
                      New price of {t.tool_name} in USDC
                    </label>
                    <input id={`price-${t.id}`} name="price" type="text" inputMode="decimal" value={t.price} maxLength={20} />
                    <Button kind="secondary" small id={`set-price-${t.tool_name}`}>
                      Set price
                    </Button>
                  </form>
                ),
              },
            ]
          : []),
      ]}
    />
  );
}

export function CallTable({ rows, now, prev, next }: { rows: readonly PaidCall[]; now: Date; prev?: string | undefined; next?: string | undefined }) {
  if (rows.length === 0) return <EmptyState title="No paid calls yet." />;
  return (
    <>
      <Table
        id="calls"
        caption="Paid calls, newest first"
        rows={rows}
        columns={[
          { label: 'Call', cell: (c) => <code id={c.id}>{c.id}</code> },
          { label: 'Tool', cell: (c) => <code>{c.tool_name}</code> },
          { label: 'Paid', cell: (c) => usdc(c.price_atomic), numeric: true },
          { label: 'Platform fee', cell: (c) => usdc(c.fee_atomic), numeric: true },
          { label: 'Payer', cell: (c) => <code title={c.payer}>{short(c.payer)}</code> },
          { label: 'Status', cell: (c) => <Badge tone={c.status === 'upstream_failed' ? 'danger' : 'ok'}>{c.status.replace('_', ' ')}</Badge> },
          { label: 'When', cell: (c) => <Time iso={c.created_at} now={now} /> },
        ]}
      />
      <Pagination prev={prev} next={next} />
    </>
  );
}

export function SweepTable({ rows, prev, next }: { rows: readonly SweepLine[]; prev?: string | undefined; next?: string | undefined }) {
  if (rows.length === 0) return <EmptyState title="No fees swept from this server yet." />;
  return (
    <>
      <Table
        id="sweeps"
        caption="Platform fee sweeps, latest first"
        rows={rows}
        columns={[
          { label: 'Sweep', cell: (s) => <code>{s.sweep_id}</code> },
          { label: 'Amount', cell: (s) => usdc(s.amount_atomic), numeric: true },
          { label: 'To', cell: (s) => <code title={s.destination}>{short(s.destination)}</code> },
          { label: 'Status', cell: (s) => <Badge tone={s.status === 'settled' ? 'ok' : s.status === 'failed' ? 'danger' : 'warn'}>{s.status}</Badge> },
          { label: 'Transaction', cell: (s) => (s.tx_hash ? <code title={s.tx_hash}>{short(s.tx_hash)}</code> : '—') },
        ]}
      />
      <Pagination prev={prev} next={next} />
    </>
  );
}
