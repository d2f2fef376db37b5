import type { AddressInfo } from 'node:net';
import t from 'tap';
import { bootstrapOrg, secondInstance, testApp } from '../helpers/app.ts';
import { streamConfig } from '../../src/usecases/status-stream.ts';

// `codespar logs tail` (the product CLI's src/commands/logs.ts) against
// GET /v1/logs/stream over a real loopback socket: it sends Authorization and
// Accept: text/event-stream with ?server=&status=&tool=&limit=, splits frames on
// a blank line and JSON-parses the `data: ` lines as {id, tool, server, status,
// duration_ms, called_at, session_id, error}. The tool call is made through a
// second instance of the service on the same database.

streamConfig.pollMs = 20;
const a = await testApp(t, { providers: true });
const appB = await secondInstance(t, a, { app: { providers: a.providerRuntime } });
const org = await bootstrapOrg(a.app, 'Tail');
const other = await bootstrapOrg(a.app, 'Other');
await a.app.listen({ port: 0, host: '127.0.0.1' });
const base = `http://127.0.0.1:${(a.app.server.address() as AddressInfo).port}`;

type Frame = { id: string | undefined; data: Record<string, unknown> };
/** The CLI's reader, plus the frame ids (for Last-Event-ID). */
async function tail(query: string, headers: Record<string, string> = {}, key = org.testKey) {
  const ac = new AbortController();
  const res = await fetch(`${base}/v1/logs/stream${query}`, { headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream', ...headers }, signal: ac.signal });
  const frames: Frame[] = [];
  let opened = false;
  const reading = (async () => {
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        const parts = buffer.split('\n\n');
        buffer = parts.pop() ?? '';
        for (const frame of parts) {
          if (frame.startsWith(': open')) opened = true;
          const lines = frame.split('\n');
          const data = lines.filter((l) => l.startsWith('data: ')).map((l) => l.slice(6));
          if (data.length === 0) continue;
          frames.push({ id: lines.find((l) => l.startsWith('id: '))?.slice(4), data: JSON.parse(data.join('\n')) });
        }
      }
    } catch {
      // aborted
    }
  })();
  const until = async (n: number) => {
    const end = Date.now() + 20_000;
    while (frames.length < n) {
      if (Date.now() > end) throw new Error(`timed out with ${frames.length} frames: ${JSON.stringify(frames)}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    return frames;
  };
  const untilSome = async (pred: (f: Frame) => boolean) => {
    const end = Date.now() + 20_000;
    for (;;) {
      const f = frames.find(pred);
      if (f) return f;
      if (Date.now() > end) throw new Error(`timed out with ${JSON.stringify(frames)}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  const untilOpen = async () => {
    while (!opened) await new Promise((r) => setTimeout(r, 10));
  };
  return { res, frames, until, untilSome, untilOpen, close: async () => (ac.abort(), await reading) };
}

const viaB = async (method: 'POST', url: string, payload: unknown) => {
  const r = await appB.inject({ method, url, headers: org.key, payload: payload as Record<string, unknown> });
  return r.json();
};

t.test('a tool call made through another instance reaches the stream; filters; Last-Event-ID resumes', async (t) => {
  const all = await tail('');
  const onlyErrors = await tail('?status=error');
  const theirs = await tail('', {}, other.testKey);
  t.equal(all.res.status, 200);
  t.match(all.res.headers.get('content-type'), /^text\/event-stream/);
  await all.untilOpen();
  await onlyErrors.untilOpen();
  await theirs.untilOpen();

  const s = await viaB('POST', '/v1/sessions', { servers: ['clima'], user_id: 'tailer' });
  const ok = await viaB('POST', `/v1/sessions/${s.id}/execute`, { tool: 'get_forecast', input: { city: 'Recife' } });
  t.equal(ok.success, true, JSON.stringify(ok));
  // A refused input is recorded as a failed call (its id in the error's details).
  const refused = await viaB('POST', `/v1/sessions/${s.id}/execute`, { tool: 'clima/get_forecast', input: { city: 'x'.repeat(101) } });
  const bad = { tool_call_id: refused.error.details.tool_call_id as string };

  const seen = await all.untilSome((f) => f.data.id === ok.tool_call_id && f.data.status !== 'running');
  const frames = all.frames;
  t.match(seen.data, { id: ok.tool_call_id, session_id: s.id, tool: 'get_forecast', server: 'clima', status: 'success', duration_ms: Number, called_at: /Z$/, error: null });
  await onlyErrors.untilSome((f) => f.data.id === bad.tool_call_id);
  t.ok(onlyErrors.frames.every((f) => f.data.status === 'error'), 'the status filter');
  t.notOk(frames.some((f) => f.data.status === 'running' && f.data.id === ok.tool_call_id && frames.indexOf(f) > frames.indexOf(seen)), 'no step back');
  t.same(theirs.frames, [], "another organization's stream sees nothing");

  // Resume after the first frame: every call that changed after it, in its
  // latest state (a call's `running` may be folded into its outcome when both
  // landed before the resume), nothing at or before the id, in log order.
  await all.untilSome((f) => f.data.id === bad.tool_call_id && f.data.status === 'error');
  const firstId = frames[0]!.id!;
  const latest = (fs: Frame[]) => new Map(fs.map((f) => [f.data.id as string, f.data.status as string]));
  const expected = latest(frames.filter((f) => f.id! > firstId));
  await all.close();
  const resumed = await tail('', { 'last-event-id': firstId });
  const again = await viaB('POST', `/v1/sessions/${s.id}/execute`, { tool: 'get_forecast', input: { city: 'Natal' } });
  await resumed.untilSome((f) => f.data.id === again.tool_call_id && f.data.status === 'success');
  t.ok(resumed.frames.every((f, i) => f.id! > firstId && (i === 0 || f.id! > resumed.frames[i - 1]!.id!)), 'after the id, in log order');
  const got = latest(resumed.frames);
  t.ok(expected.size > 0);
  for (const [id, status] of expected) t.equal(got.get(id), status, `${id} resumed in its latest state`);

  // --limit: the last calls first.
  const recent = await tail('?limit=2&server=clima');
  const back = await recent.until(2);
  t.same(back.map((f) => f.data.id), [bad.tool_call_id, again.tool_call_id], 'the last two, newest last, as a log reads');
  await Promise.all([resumed.close(), recent.close(), onlyErrors.close(), theirs.close()]);
});
