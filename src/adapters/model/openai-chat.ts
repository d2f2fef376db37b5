import { guardedRequest, type AllowedTargets } from '../outbound-http.ts';
import { type ChatMessage, type Model, ModelError, type ModelTool, type ModelTurn } from './port.ts';

// OpenAI-compatible chat completions (POST {base}/chat/completions) with tool
// calling, through the guarded outbound client. Configured by MODEL_BASE_URL,
// MODEL_API_KEY, MODEL_NAME; without them there is no model (the send route
// answers 501 not_wired). The key goes only into the Authorization header.

export type ModelConfig = { baseUrl: string; apiKey: string; model: string; timeoutMs?: number };

export function modelConfigFromEnv(env: NodeJS.ProcessEnv = process.env): ModelConfig | undefined {
  const baseUrl = env.MODEL_BASE_URL?.trim();
  const apiKey = env.MODEL_API_KEY?.trim();
  const model = env.MODEL_NAME?.trim();
  return baseUrl && apiKey && model ? { baseUrl: baseUrl.replace(/\/+$/, ''), apiKey, model } : undefined;
}

export class OpenAIChatModel implements Model {
  constructor(
    private readonly cfg: ModelConfig,
    private readonly allow: AllowedTargets,
  ) {}

  get name(): string {
    return this.cfg.model;
  }

  async complete(messages: ChatMessage[], tools: ModelTool[]): Promise<ModelTurn> {
    let r;
    try {
      r = await guardedRequest(`${this.cfg.baseUrl}/chat/completions`, this.allow, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${this.cfg.apiKey}` },
        body: JSON.stringify({ model: this.cfg.model, messages, ...(tools.length ? { tools, tool_choice: 'auto' } : {}) }),
        timeoutMs: this.cfg.timeoutMs ?? 60_000,
        maxBodyBytes: 1_048_576,
      });
    } catch (err) {
      throw new ModelError(`the model endpoint could not be reached: ${err instanceof Error ? err.message : 'error'}`);
    }
    if (r.status < 200 || r.status >= 300) throw new ModelError(`the model endpoint answered ${r.status}`);
    let json: { choices?: { message?: { content?: string | null; tool_calls?: ModelTurn['tool_calls'] } }[] };
    try {
      json = JSON.parse(r.body);
    } catch {
      throw new ModelError('the model endpoint answered something other than JSON');
    }
    const m = json.choices?.[0]?.message;
    if (!m) throw new ModelError('the model answered no choice');
    return { content: m.content ?? null, tool_calls: (m.tool_calls ?? []).filter((c) => c?.type === 'function' && typeof c.function?.name === 'string') };
  }
}
