// The model port: one chat turn with tool calling. The agent loop speaks only
// this; the live adapter is an OpenAI-compatible chat-completions endpoint.

export type ChatMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string | null; tool_calls?: ModelToolCall[] }
  | { role: 'tool'; tool_call_id: string; content: string };
export type ModelToolCall = { id: string; type: 'function'; function: { name: string; arguments: string } };
export type ModelTool = { type: 'function'; function: { name: string; description: string; parameters: unknown } };
export type ModelTurn = { content: string | null; tool_calls: ModelToolCall[] };

export interface Model {
  readonly name: string;
  complete(messages: ChatMessage[], tools: ModelTool[]): Promise<ModelTurn>;
}

export class ModelError extends Error {
  override name = 'ModelError';
}
