import type { ComponentChildren, JSX } from 'preact';

// The dashboard's shared components: buttons, form fields with hint and
// inline error, an error summary (GOV.UK style), a table that becomes a list
// on a phone, badges, copyable ids, times, empty states, cursor pagination.
// No inline styles or scripts (the CSP allows neither).

type ButtonProps = { kind?: 'primary' | 'secondary' | 'danger'; small?: boolean; id?: string; name?: string; value?: string; children: ComponentChildren; type?: 'submit' | 'button' };

export function Button({ kind = 'primary', small, children, type = 'submit', ...rest }: ButtonProps) {
  return (
    <button type={type} class={`btn btn-${kind}${small ? ' btn-small' : ''}`} {...rest}>
      {children}
    </button>
  );
}

export function LinkButton({ href, kind = 'secondary', children }: { href: string; kind?: 'primary' | 'secondary'; children: ComponentChildren }) {
  return (
    <a class={`btn btn-${kind}`} href={href}>
      {children}
    </a>
  );
}

/** A hidden `_csrf` field: every state-changing form carries it. */
export const Csrf = ({ token }: { token: string }) => <input type="hidden" name="_csrf" value={token} />;

/** A POST form to a dashboard path, with the session's CSRF token. */
export function PostForm({ action, csrf, children, id, inline }: { action: string; csrf: string; children: ComponentChildren; id?: string; inline?: boolean }) {
  return (
    <form method="post" action={action} id={id} class={inline ? 'inline-form' : undefined}>
      <Csrf token={csrf} />
      {children}
    </form>
  );
}

export type FieldError = { field: string; message: string };

type FieldProps = {
  id: string;
  name?: string;
  label: string;
  hint?: string;
  error?: string | undefined;
  value?: string | undefined;
  type?: 'text' | 'email';
  autocomplete?: string;
  inputMode?: 'numeric' | 'email' | 'text';
  class?: string;
  required?: boolean;
  autofocus?: boolean;
  maxLength?: number;
};

/** A control's label, its hint and its inline error (the ids the control's aria-describedby names). */
function FieldHead({ id, label, hint, error }: { id: string; label: string; hint?: string | undefined; error?: string | undefined }) {
  return (
    <>
      <label for={id}>{label}</label>
      {hint ? (
        <span class="hint" id={`${id}-hint`}>
          {hint}
        </span>
      ) : null}
      {error ? (
        <span class="field-error" id={`${id}-error`}>
          <span class="visually-hidden">Error: </span>
          {error}
        </span>
      ) : null}
    </>
  );
}

/** A labelled text input with its hint and inline error (described by both). */
export function Field({ id, name, label, hint, error, value, type = 'text', autocomplete, inputMode, class: cls, required, autofocus, maxLength }: FieldProps) {
  const described = [hint ? `${id}-hint` : '', error ? `${id}-error` : ''].filter(Boolean).join(' ') || undefined;
  return (
    <div class={`field${error ? ' has-error' : ''}`}>
      <FieldHead id={id} label={label} hint={hint} error={error} />
      <input
        id={id}
        name={name ?? id}
        type={type}
        value={value ?? ''}
        class={cls}
        autocomplete={autocomplete}
        inputMode={inputMode}
        aria-describedby={described}
        aria-invalid={error ? 'true' : undefined}
        required={required}
        autofocus={autofocus}
        maxLength={maxLength}
      />
    </div>
  );
}

/** A labelled select. */
export function Select({ id, name, label, hint, options, value, error }: { id: string; name?: string; label: string; hint?: string; options: readonly { value: string; label: string }[]; value?: string; error?: string | undefined }) {
  return (
    <div class={`field${error ? ' has-error' : ''}`}>
      <FieldHead id={id} label={label} hint={hint} error={error} />
      <select id={id} name={name ?? id} aria-describedby={hint ? `${id}-hint` : undefined}>
        {options.map((o) => (
          <option value={o.value} selected={o.value === value}>
            {o.label}
          </option>
        ))}
      </select>
    </div>
  );
}

/** The errors of a form, each linking to its field; focus lands here (GOV.UK error summary). */
export function ErrorSummary({ errors }: { errors: readonly FieldError[] }) {
  if (errors.length === 0) return null;
  return (
    <div class="error-summary" role="alert" aria-labelledby="error-summary-title" tabIndex={-1} id="error-summary">
      <h2 id="error-summary-title">There is a problem</h2>
      <ul>
        {errors.map((e) => (
          <li>
            <a href={`#${e.field}`}>{e.message}</a>
          </li>
        ))}
      </ul>
    </div>
  );
}

export type Column<R> = { label: string; cell: (row: R) => ComponentChildren; numeric?: boolean };

/** A table with a caption; on a phone each row is a card of labelled values. */
export function Table<R>({ caption, columns, rows, id }: { caption: string; columns: readonly Column<R>[]; rows: readonly R[]; id?: string }) {
  return (
    <div class="table-wrap">
      <table class="data" id={id}>
        <caption>{caption}</caption>
        <thead>
          <tr>
            {columns.map((c) => (
              <th scope="col" class={c.numeric ? 'num' : undefined}>
                {c.label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr>
              {columns.map((c) => (
                <td data-label={c.label} class={c.numeric ? 'num' : undefined}>
                  {c.cell(r)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function Badge({ tone = 'neutral', children }: { tone?: 'ok' | 'danger' | 'warn' | 'neutral'; children: ComponentChildren }) {
  return <span class={`badge badge-${tone}`}>{children}</span>;
}

let copySeq = 0;
/** An id (or a secret shown once) with a copy button (the button appears with JavaScript). */
export function Copyable({ value, label, id, secret }: { value: string; label?: string; id?: string; secret?: boolean }) {
  const target = id ?? `copy-${++copySeq}`;
  return (
    <span class="copyable">
      <code id={target} class={secret ? 'secret' : undefined}>
        {value}
      </code>
      <button type="button" class="btn btn-secondary btn-small copy-btn" data-copy={target} hidden aria-label={`Copy ${label ?? value}`}>
        Copy
      </button>
    </span>
  );
}

const MINUTE = 60_000;
/** A time as "3 minutes ago" with the exact UTC time in its datetime and title. */
export function Time({ iso, now }: { iso: string | null; now: Date }) {
  if (!iso) return <span>never</span>;
  const t = new Date(iso);
  const ms = now.getTime() - t.getTime();
  const abs = Math.abs(ms);
  const rel =
    abs < MINUTE ? 'just now' : abs < 60 * MINUTE ? `${Math.round(abs / MINUTE)} min` : abs < 48 * 60 * MINUTE ? `${Math.round(abs / (60 * MINUTE))} h` : `${Math.round(abs / (24 * 60 * MINUTE))} days`;
  const text = abs < MINUTE ? rel : ms >= 0 ? `${rel} ago` : `in ${rel}`;
  const exact = t.toISOString().replace('T', ' ').slice(0, 16) + ' UTC';
  return (
    <time dateTime={t.toISOString()} title={exact}>
      {text}
    </time>
  );
}

export function EmptyState({ title, children }: { title: string; children?: ComponentChildren }) {
  return (
    <div class="empty">
      <p>
        <strong>{title}</strong>
      </p>
      {children}
    </div>
  );
}

/** Cursor pagination: "newer" and "older" links, either absent at an end. */
export function Pagination({ prev, next }: { prev?: string | undefined; next?: string | undefined }) {
  if (!prev && !next) return null;
  return (
    <nav class="pagination" aria-label="Pages">
      {prev ? <a href={prev}>← Newer</a> : <span />}
      {next ? <a href={next}>Older →</a> : <span />}
    </nav>
  );
}

export type Children = ComponentChildren;
export type El = JSX.Element;
