import http from 'node:http';
import type { AddressInfo } from 'node:net';

// A scripted model on loopback speaking OpenAI chat completions: each POST
// /chat/completions answers the next scripted turn (tool calls or a final
// message) and keeps the request for the test to read.

export type ScriptedTurn = { tool_calls: { name: string; arguments: unknown }[] } | { content: string };

export async function scriptedModel(script: ScriptedTurn[], apiKey: string) {
  const requests: { authorization: string | undefined; body: { model: string; messages: { role: string; content: string | null; tool_call_id?: string }[]; tools?: { function: { name: string } }[] } }[] = [];
  let turn = 0;
  const srv = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return void res.writeHead(404).end();
      if (req.headers.authorization !== `Bearer ${apiKey}`) return void res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":{"message":"bad key"}}');
      const body = JSON.parse(raw);
      requests.push({ authorization: req.headers.authorization, body });
      const step = script[Math.min(turn++, script.length - 1)]!;
      const message =
        'content' in step
          ? { role: 'assistant', content: step.content }
          : { role: 'assistant', content: null, tool_calls: step.tool_calls.map((c, i) => ({ id: `call_${turn}_${i}`, type: 'function', function: { name: c.name, arguments: JSON.stringify(c.arguments) } })) };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: `chatcmpl-${turn}`, object: 'chat.completion', model: body.model, choices: [{ index: 0, message, finish_reason: 'content' in step ? 'stop' : 'tool_calls' }] }));
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}/v1`,
    requests,
    reset: () => void (turn = 0),
    close: () => new Promise<void>((r) => srv.close(() => r())),
  };
}
