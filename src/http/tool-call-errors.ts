import { canonicalToolCallId } from '../usecases/tool-calls.ts';
import { RawHttpError } from './errors.ts';

// A helper of the HTTP layer (registers no routes): a tool call's `{id}` is
// `tc_<digits>` or bare digits; a malformed id answers 400 and an id not
// visible to the caller 404, each with a bare body (no error.code, no
// request_id: spec Part 7). Used by the tool-call routes, their status streams
// and the composition root's early answer to an over-long id.

export const malformedId = () => new RawHttpError(400, { error: 'invalid_tool_call_id', message: 'the id must be tc_<digits> or digits' });
export const notVisible = () => new RawHttpError(404, { error: 'not_found', message: 'tool call not found' });

/** The canonical id of a path's `{id}`, or the bare 400. */
export function toolCallIdParam(raw: string): string {
  const id = canonicalToolCallId(raw);
  if (!id) throw malformedId();
  return id;
}
