import type { Thresholds } from '../../commands/audit.ts';
import type { AuditEventView, HealthView, IncidentView } from '../usecases/audit.ts';
import type { CosignedCheckpoint } from '../usecases/audit-proofs.ts';
import { assetUrl } from './assets.ts';
import { Badge, Button, Csrf, EmptyState, ErrorSummary, type FieldError, Pagination, Table, Time } from './components.tsx';
import { type ExplorerFilter, THRESHOLD_FIELDS } from './audit-forms.ts';

// The audit page's sections: the chain's health and size, the latest signed
// checkpoint with its witnesses' cosignatures, the incidents, the
// verification thresholds, and the event explorer whose every entry can be
// verified in the browser (assets/verify-entry.js).

const HEALTH_TONE = { healthy: 'ok', catching_up: 'ok', verifying: 'neutral', link_unverifiable: 'warn', degraded: 'warn', broken: 'danger' } as const;

export function HealthSection({ h, now }: { h: HealthView; now: Date }) {
  return (
    <section aria-labelledby="health-title">
      <h2 id="health-title">Chain health</h2>
      <p id="health">
        <Badge tone={HEALTH_TONE[h.actionable_status]}>{h.actionable_status.replace('_', ' ')}</Badge> {h.detail}
      </p>
      <dl class="facts">
        <dt>Entries</dt>
        <dd id="chain-size">{h.last_sequence_number}</dd>
        <dt>Verified up to</dt>
        <dd>
          {h.verification.watermark_sequence} ({Math.round(h.verification.coverage_ratio * 100)}%)
        </dd>
        <dt>Last verified</dt>
        <dd>
          <Time iso={h.last_checked_at} now={now} />
        </dd>
        <dt>Open incidents</dt>
        <dd>{h.incidents.open_count}</dd>
      </dl>
    </section>
  );
}

type Checkpoint = { size: number; root_hash: string; note: string; cosigned: CosignedCheckpoint | null } | null;

export function CheckpointSection({ cp, witnesses }: { cp: Checkpoint; witnesses: HealthView['witnesses'] }) {
  return (
    <section aria-labelledby="checkpoint-title">
      <h2 id="checkpoint-title">Latest signed checkpoint</h2>
      {cp ? (
        <>
          <dl class="facts">
            <dt>Size</dt>
            <dd id="checkpoint-size">{cp.size}</dd>
            <dt>Root</dt>
            <dd>
              <code class="hash">{cp.root_hash}</code>
            </dd>
          </dl>
          <pre id="checkpoint-note" tabIndex={0}>{cp.note}</pre>
          <h3>Witnesses</h3>
          {witnesses.length === 0 && !cp.cosigned ? (
            <p>No witness is configured (AUDIT_WITNESSES): only this service's signature vouches for the checkpoints.</p>
          ) : (
            <>
              {cp.cosigned ? (
                <p id="cosigned">
                  The newest cosigned checkpoint is at size {cp.cosigned.size}, cosigned by {cp.cosigned.witnesses.map((w) => w.name).join(', ')}.
                </p>
              ) : null}
              <Table
                id="witnesses"
                caption="Each witness and how far behind the chain its last cosignature is"
                rows={witnesses}
                columns={[
                  { label: 'Witness', cell: (w) => <code>{w.name}</code> },
                  { label: 'Cosigned size', cell: (w) => w.cosigned_size, numeric: true },
                  { label: 'Behind by', cell: (w) => `${w.lag_entries} entries`, numeric: true },
                  { label: 'Cosigned at', cell: (w) => w.cosigned_at ?? 'never' },
                ]}
              />
            </>
          )}
        </>
      ) : (
        <EmptyState title="No checkpoint is signed yet.">
          <p>The first one is signed after the first entries are sealed.</p>
        </EmptyState>
      )}
    </section>
  );
}

export function IncidentsSection({ incidents, now, mayAct }: { incidents: readonly IncidentView[]; now: Date; mayAct: boolean }) {
  return (
    <section aria-labelledby="incidents-title">
      <h2 id="incidents-title">Incidents</h2>
      {incidents.length === 0 ? (
        <EmptyState title="No incidents.">
          <p>A break found by verification opens one; acknowledging it records what was done, and health turns green only after a clean re-verification.</p>
        </EmptyState>
      ) : (
        <Table
          id="incidents"
          caption="Breaks verification found, newest first"
          rows={incidents}
          columns={[
            { label: 'Kind', cell: (i) => <code>{i.kind}</code> },
            { label: 'At entry', cell: (i) => i.detected_at_sequence, numeric: true },
            { label: 'Detected', cell: (i) => <Time iso={i.detected_at} now={now} /> },
            { label: 'Status', cell: (i) => <Badge tone={i.status === 'open' ? 'danger' : 'neutral'}>{i.status}</Badge> },
            {
              label: 'Action',
              cell: (i) =>
                i.status === 'open' && mayAct ? (
                  <a href={`/dashboard/audit/incidents/${encodeURIComponent(i.id)}`} data-incident={i.id}>
                    Acknowledge
                  </a>
                ) : (
                  '—'
                ),
            },
          ]}
        />
      )}
    </section>
  );
}

export function AckForm({ incident, csrf, errors, values }: { incident: IncidentView; csrf: string; errors: readonly FieldError[]; values: Record<string, string> }) {
  const err = (f: string) => errors.find((e) => e.field === f)?.message;
  return (
    <>
      <ErrorSummary errors={errors} />
      <p id="incident-detail">{incident.detail}</p>
      <form method="post" action={`/dashboard/audit/incidents/${encodeURIComponent(incident.id)}/acknowledge`} id="ack">
        <Csrf token={csrf} />
        <fieldset class={`field${err('personal-yes') ? ' has-error' : ''}`}>
          <legend>Was personal data affected?</legend>
          {err('personal-yes') ? <span class="field-error">{err('personal-yes')}</span> : null}
          <label class="radio">
            <input type="radio" id="personal-yes" name="personal_data_affected" value="yes" checked={values.personal_data_affected === 'yes'} /> Yes
          </label>
          <label class="radio">
            <input type="radio" id="personal-no" name="personal_data_affected" value="no" checked={values.personal_data_affected === 'no'} /> No
          </label>
        </fieldset>
        <fieldset class={`field${err('anpd-not_required') ? ' has-error' : ''}`}>
          <legend>ANPD notification</legend>
          {err('anpd-not_required') ? <span class="field-error">{err('anpd-not_required')}</span> : null}
          <label class="radio">
            <input type="radio" id="anpd-not_required" name="anpd_notification_status" value="not_required" checked={values.anpd_notification_status === 'not_required'} /> Not required
          </label>
          <label class="radio">
            <input type="radio" id="anpd-notified" name="anpd_notification_status" value="notified" checked={values.anpd_notification_status === 'notified'} /> Notified
          </label>
        </fieldset>
        <div class={`field${err('resolution_summary') ? ' has-error' : ''}`}>
          <label for="resolution_summary">What was found and what was done</label>
          {err('resolution_summary') ? <span class="field-error">{err('resolution_summary')}</span> : null}
          <textarea id="resolution_summary" name="resolution_summary" rows={5} maxLength={8000}>
            {values.resolution_summary ?? ''}
          </textarea>
        </div>
        <div class={`field${err('incident_reference') ? ' has-error' : ''}`}>
          <label for="incident_reference">Your reference (optional)</label>
          <input id="incident_reference" name="incident_reference" type="text" maxLength={256} value={values.incident_reference ?? ''} />
        </div>
        <Button id="acknowledge">Acknowledge</Button>
      </form>
    </>
  );
}

export function ConfigSection({ cfg, csrf, mayAct, errors }: { cfg: Thresholds & { updated_at: string }; csrf: string; mayAct: boolean; errors: readonly FieldError[] }) {
  return (
    <section aria-labelledby="config-title">
      <h2 id="config-title">Verification thresholds</h2>
      {mayAct ? (
        <form method="post" action="/dashboard/audit/config" id="config">
          <ErrorSummary errors={errors} />
          <Csrf token={csrf} />
          <div class="grid-fields">
            {THRESHOLD_FIELDS.map((f) => (
              <div class="field">
                <label for={f.key}>
                  {f.label} ({f.unit})
                </label>
                <input id={f.key} name={f.key} type="text" inputMode="numeric" value={String(cfg[f.key])} />
              </div>
            ))}
          </div>
          <Button id="save-config" kind="secondary">
            Save thresholds
          </Button>
        </form>
      ) : (
        <dl class="facts" id="config">
          {THRESHOLD_FIELDS.map((f) => (
            <>
              <dt>{f.label}</dt>
              <dd>
                {cfg[f.key]} {f.unit}
              </dd>
            </>
          ))}
        </dl>
      )}
    </section>
  );
}

type ExplorerProps = { events: readonly AuditEventView[]; next: number | null; filter: ExplorerFilter; errors: readonly FieldError[]; origin: string; verifierKey: string | null; now: Date };

export function ExplorerSection({ events, next, filter, errors, origin, verifierKey, now }: ExplorerProps) {
  const qs = (extra: Record<string, string>) => `/dashboard/audit?${new URLSearchParams(Object.entries({ type: filter.type, from: filter.from, to: filter.to, ...extra }).filter(([, v]) => v !== '')).toString()}#explorer-title`;
  return (
    <section aria-labelledby="explorer-title" data-verify-origin={origin} data-verifier-key={verifierKey ?? ''} data-noble-url={assetUrl('noble-ed25519.js')}>
      <h2 id="explorer-title">Events</h2>
      <ErrorSummary errors={errors} />
      <form method="get" action="/dashboard/audit" class="filters" id="explore">
        <div class="field">
          <label for="explore-type">Event type</label>
          <span class="hint" id="explore-type-hint">
            Exact, or a prefix ending in a dot (approval.)
          </span>
          <input id="explore-type" name="type" type="text" value={filter.type} aria-describedby="explore-type-hint" />
        </div>
        <div class="field">
          <label for="explore-from">From (UTC)</label>
          <input id="explore-from" name="from" type="text" placeholder="2026-11-22" value={filter.from} />
        </div>
        <div class="field">
          <label for="explore-to">To (UTC)</label>
          <input id="explore-to" name="to" type="text" placeholder="2026-11-29" value={filter.to} />
        </div>
        <Button kind="secondary" id="filter">
          Show
        </Button>
      </form>
      <div class="field">
        <label for="verifier-key">Verifier key</label>
        <span class="hint" id="verifier-key-hint">
          The key checkpoints are checked against: the one this service publishes, or paste the one your organization pinned (kept in this browser).
        </span>
        <input id="verifier-key" type="text" value={verifierKey ?? ''} aria-describedby="verifier-key-hint" class="mono" />
      </div>
      {events.length === 0 ? (
        <EmptyState title="No events match." />
      ) : (
        <Table
          id="events"
          caption="Entries of the chain, newest first; Verify checks one in this browser against the signed checkpoint"
          rows={events}
          columns={[
            { label: 'Entry', cell: (e) => e.sequence_number, numeric: true },
            { label: 'Type', cell: (e) => <code>{e.event_type}</code> },
            { label: 'When', cell: (e) => <Time iso={e.happened_at} now={now} /> },
            { label: 'Hash', cell: (e) => <code class="hash">{e.entry_hash.slice(0, 16)}…</code> },
            {
              label: 'Verify',
              cell: (e) => (
                <>
                  <button type="button" hidden class="btn btn-secondary btn-small" data-verify-seq={String(e.sequence_number)} data-entry-url={`/dashboard/audit/entries/${e.sequence_number}`} data-proof-url={`/dashboard/audit/entries/${e.sequence_number}/proof`} id={`verify-btn-${e.sequence_number}`}>
                    Verify
                  </button>
                  <span id={`verify-${e.sequence_number}`} class="verify-result" role="status" />
                </>
              ),
            },
          ]}
        />
      )}
      <Pagination next={next !== null ? qs({ before: String(next) }) : undefined} prev={filter.before ? qs({}) : undefined} />
    </section>
  );
}
