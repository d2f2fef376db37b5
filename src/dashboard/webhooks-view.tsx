import type { FastifyRequest } from 'fastify';
import type { EndpointRow } from '../usecases/webhook-endpoints.ts';
import type { DeliveryListRow, DeliveryPage, HourCount } from '../usecases/webhook-activity.ts';
import { ListPages } from './browse.tsx';
import { Badge, Button, type Column, Copyable, EmptyState, PostForm, Table, Time } from './components.tsx';

// What the webhook pages show: endpoints with their status, a secret shown
// once, the attempts-per-hour chart (uPlot, drawn from the table beside it),
// deliveries and dead letters as cursor-paged tables, and the auto-pause
// explained. Routes and actions: webhooks.tsx.

const STATUS_TONE = { active: 'ok', paused: 'warn', error: 'danger' } as const;
const STATUS_TEXT = { active: 'active', paused: 'paused', error: 'paused: failing' } as const;

export const EndpointStatus = ({ status }: { status: EndpointRow['status'] }) => <Badge tone={STATUS_TONE[status]}>{STATUS_TEXT[status]}</Badge>;

const DELIVERY_TONE: Record<string, 'ok' | 'danger' | 'warn' | 'neutral'> = { delivered: 'ok', dead: 'danger', pending: 'warn' };
export const DeliveryStatus = ({ status }: { status: string }) => <Badge tone={DELIVERY_TONE[status] ?? 'neutral'}>{status}</Badge>;

/** A signing secret shown this once, with a copy button and what to do with it. */
export function NewSecret({ secret, what }: { secret: string; what: string }) {
  return (
    <div class="panel" id="created-secret">
      <h2>Copy the signing secret now</h2>
      <p>{what} This is the only time it is shown: we keep it encrypted and never show it again. Your receiver checks each delivery's <code>webhook-signature</code> header with it.</p>
      <Copyable value={secret} id="new-secret" label="the signing secret" secret />
    </div>
  );
}

/** Attempts per hour as a chart (uPlot reads #hours-data) and the same figures as a table. */
export function HourChart({ hours, what }: { hours: readonly HourCount[]; what: string }) {
  const any = hours.some((h) => h.delivered + h.failed > 0);
  const shown = hours.filter((h) => h.delivered + h.failed > 0);
  const columns: Column<HourCount>[] = [
    { label: 'Hour (UTC)', cell: (h) => `${h.hour.slice(0, 10)} ${h.hour.slice(11, 16)}` },
    { label: 'Delivered', cell: (h) => h.delivered, numeric: true },
    { label: 'Failed', cell: (h) => h.failed, numeric: true },
  ];
  return (
    <section class="panel" aria-labelledby="hours-title">
      <h2 id="hours-title">Deliveries per hour</h2>
      {!any ? (
        <EmptyState title={`No delivery attempts ${what} in the last ${hours.length} hours.`} />
      ) : (
        <>
          <div class="chart" id="deliveries-chart" role="img" aria-label={`Delivery attempts per hour ${what}, delivered and failed, the last ${hours.length} hours; the table below has the figures.`} />
          <Table caption={`Attempts per hour ${what} (hours with none left out)`} columns={columns} rows={shown} id="hours-table" />
          {/* The chart reads its points here (a JSON data block is not a script: the CSP allows it). */}
          <script type="application/json" id="hours-data" dangerouslySetInnerHTML={{ __html: JSON.stringify(hours.map((h) => [h.hour, h.delivered, h.failed])) }} />
        </>
      )}
    </section>
  );
}

type DeliveriesProps = { endpointId: string; page: DeliveryPage; now: Date; csrf: string; mayWrite: boolean; dead?: boolean; req: FastifyRequest };

/** Deliveries (or dead letters) of an endpoint, newest first, each opening its request and response; dead letters can be redelivered. */
export function DeliveryTable({ endpointId, page, now, csrf, mayWrite, dead, req }: DeliveriesProps) {
  const base = `/dashboard/webhooks/${encodeURIComponent(endpointId)}`;
  const columns: Column<DeliveryListRow>[] = [
    { label: 'Delivery', cell: (d) => <a href={`${base}/deliveries/${d.id}`} data-delivery={d.id}>#{d.id}</a> },
    { label: 'Event', cell: (d) => <code>{d.event_type}</code> },
    { label: 'Kind', cell: (d) => d.kind },
    { label: 'Status', cell: (d) => <DeliveryStatus status={d.status} /> },
    { label: 'Attempts', cell: (d) => d.attempt, numeric: true },
    { label: 'Last answer', cell: (d) => (d.response_status === null ? '—' : String(d.response_status)) },
    { label: 'Created', cell: (d) => <Time iso={d.created_at} now={now} /> },
  ];
  if (dead && mayWrite) {
    columns.push({
      label: 'Action',
      cell: (d) => (
        <PostForm action={`${base}/deliveries/${d.id}/redeliver`} csrf={csrf} inline>
          <Button kind="secondary" small id={`redeliver-${d.id}`}>
            Redeliver<span class="visually-hidden"> delivery {d.id}</span>
          </Button>
        </PostForm>
      ),
    });
  }
  if (page.rows.length === 0) return <EmptyState title={dead ? 'No dead letters.' : 'No deliveries yet.'}>{dead ? <p>A delivery that fails its last allowed attempt lands here, to be redelivered.</p> : null}</EmptyState>;
  return (
    <>
      <Table caption={dead ? 'Dead letters, newest first' : 'Deliveries, newest first'} columns={columns} rows={page.rows} id={dead ? 'dead-letters' : 'deliveries'} />
      <ListPages req={req} cursor={dead ? 'dead_before' : 'before'} next={page.next_before} label={dead ? 'dead letters' : 'deliveries'} path={base} />
    </>
  );
}

/** Why an endpoint paused itself, and what brings it back. */
export function AutoPaused({ cause, now }: { cause: { consecutive_dead: number; last_dead_at: string | null; last_error: string | null; last_status: number | null }; now: Date }) {
  const answer = cause.last_status !== null ? `answered ${cause.last_status}` : cause.last_error ? `could not be reached (${cause.last_error})` : 'failed';
  return (
    <div class="panel" id="auto-paused" role="note">
      <h2>We paused this endpoint</h2>
      <p>
        Its last {cause.consecutive_dead} deliveries failed every attempt we are allowed to make, so we stopped sending to it rather than keep failing. The newest dead letter {answer}
        {cause.last_dead_at ? (
          <>
            {' '}
            (<Time iso={cause.last_dead_at} now={now} />)
          </>
        ) : null}
        .
      </p>
      <p>New events still queue for it. Fix the receiver, then <strong>Resume</strong>: what queued is sent; dead letters are redelivered one by one below.</p>
    </div>
  );
}
