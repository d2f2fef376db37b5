// The search box in the shell's header, on every signed-in page: a GET form
// (nothing changes, so no CSRF token) to /dashboard/search, which opens the
// page of the id typed (src/dashboard/search.tsx).

export function SearchBox({ value = '' }: { value?: string }) {
  return (
    <form method="get" action="/dashboard/search" role="search" class="search-box" aria-label="Find an id">
      <label for="search-q" class="visually-hidden">
        Find an id
      </label>
      <input id="search-q" name="q" type="search" value={value} placeholder="Find an id: tc_…, ses_…, mdt_…" maxLength={200} autocomplete="off" spellcheck={false} />
      <button type="submit" class="btn btn-secondary btn-small">
        Find
      </button>
    </form>
  );
}
