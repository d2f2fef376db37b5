// What a person at a terminal reads of the request log: health polls
// (`GET /healthz`, `/readyz`, every few seconds from a load balancer or a
// watch loop) are dropped at info and below; everything else, and anything a
// poll logs at warn or above, goes through. JSON logs (not a terminal) keep
// every line: a collector filters there.

const POLLS = new Set(['/healthz', '/readyz']);
/** The most poll request ids remembered between their two lines (a bound, should "request completed" never come). */
const REMEMBERED_MAX = 1_000;

export function withoutHealthPolls(out: { write(line: string): unknown }): { write(line: string): void } {
  const polls = new Set<string>();
  return {
    write(line: string) {
      if (line.includes('"/healthz') || line.includes('"/readyz') || polls.size > 0) {
        try {
          const o = JSON.parse(line) as { level?: number; request_id?: string; req?: { url?: string } };
          const quiet = (o.level ?? 30) <= 30;
          if (quiet && o.request_id && o.req?.url && POLLS.has(o.req.url.split('?')[0]!)) {
            polls.add(o.request_id);
            if (polls.size > REMEMBERED_MAX) polls.delete(polls.values().next().value!);
            return;
          }
          if (o.request_id && polls.delete(o.request_id) && quiet) return;
        } catch {
          // not JSON: pass it on
        }
      }
      out.write(line);
    },
  };
}
