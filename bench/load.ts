// A closed-loop HTTP load generator, run as its own process by the benchmarks.
//   tsx bench/load.ts <config.json>
// Config: {target, connections, seconds, mode: "baseline" | "mandates" | "spends", headers, mandateIds}
// Prints one JSON line: {requests, rps, p50_ms, p99_ms, unexpected, samples}.
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';

type Config = { target: string; connections: number; seconds: number; mode: 'baseline' | 'mandates' | 'spends'; headers: Record<string, string>; mandateIds: string[] };
const cfg = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as Config;
const url = new URL(cfg.target);
const agent = new Agent({ keepAlive: true, maxSockets: cfg.connections });

function call(method: string, path: string, body: unknown): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = request(
      { host: url.hostname, port: url.port, method, path, agent, headers: { ...cfg.headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

/** An unexpected answer, kept for the report (a few). */
function unexpectedAnswer(r: { status: number; body: string }): false {
  if (samples.length < 5) samples.push(`${r.status} ${r.body.slice(0, 300)}`);
  return false;
}

/** One request of the mix, and whether its answer is one the API documents for it. */
async function one(i: number): Promise<boolean> {
  if (cfg.mode === 'baseline') {
    const r = await call('POST', '/baseline', { amount_minor: '30', currency: 'BRL', merchant: 'shop@pix.example', n: i });
    return r.status === 201;
  }
  const id = cfg.mandateIds[Math.floor(Math.random() * cfg.mandateIds.length)]!;
  const pick = cfg.mode === 'spends' ? 0 : Math.random();
  if (pick < 0.5) {
    const r = await call('POST', `/v1/consumers/mandates/${id}/spend`, { amount_minor: '1', currency: 'BRL', merchant: 'shop@pix.example' });
    if (r.status === 201) return JSON.parse(r.body).decision === 'approved' || unexpectedAnswer(r);
    const code = JSON.parse(r.body).error?.code;
    return (r.status === 409 && code === 'mandate_not_active') || (r.status === 422 && code === 'total_cap_exceeded') || unexpectedAnswer(r);
  }
  const verb = pick < 0.75 ? 'pause' : 'resume';
  const r = await call('POST', `/v1/mandates/${id}/${verb}`, {});
  if (r.status === 200) return ['paused', 'active'].includes(JSON.parse(r.body).mandate.status) || unexpectedAnswer(r);
  return (r.status === 409 && JSON.parse(r.body).error?.code === 'transition_conflict') || unexpectedAnswer(r);
}

const latencies: number[] = [];
let unexpected = 0;
const samples: string[] = [];
const end = Date.now() + cfg.seconds * 1000;
const t0 = process.hrtime.bigint();
await Promise.all(
  Array.from({ length: cfg.connections }, async (_, w) => {
    for (let i = 0; Date.now() < end; i++) {
      const s = process.hrtime.bigint();
      let ok: boolean;
      try {
        ok = await one(w * 1_000_000 + i);
      } catch (err) {
        ok = false;
        if (samples.length < 5) samples.push(String(err));
      }
      latencies.push(Number(process.hrtime.bigint() - s) / 1e6);
      if (!ok) unexpected++;
    }
  }),
);
const secs = Number(process.hrtime.bigint() - t0) / 1e9;
latencies.sort((a, b) => a - b);
const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0;
process.stdout.write(JSON.stringify({ requests: latencies.length, rps: latencies.length / secs, p50_ms: pct(0.5), p99_ms: pct(0.99), unexpected, samples }) + '\n');
agent.destroy();
