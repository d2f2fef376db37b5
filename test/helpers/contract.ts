import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import * as formats from 'ajv-formats';
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

// Every answer a test app gives, held to the served OpenAPI document: its
// status must be one the operation documents, and a JSON body must match the
// schema documented for that status. A kept validator (Ajv, JSON Schema
// 2020-12, which OpenAPI 3.1 schemas are). Requests no operation takes (an
// unknown path, the reference page, the dashboard) are not operations and are
// not checked. The violations are kept; the test helper fails the test that
// made the app when there are any (test/helpers/app.ts).

type Json = Record<string, unknown>;
type FormatsPlugin = (ajv: Ajv2020) => unknown;
const addFormats = ((formats as unknown as { default: FormatsPlugin & { default?: FormatsPlugin } }).default.default ?? (formats as unknown as { default: FormatsPlugin }).default) as FormatsPlugin;

/** Secrets shown once (keys, signing secrets, tokens, codes) kept to their prefix in a recorded example. */
const SECRET = /^(sk_(test|live)_|whsec_|svc_|oat_|ort_|oac_|lnk_|ey[A-Za-z0-9_-]{10,}\.)/;
/** Fields that hold a secret whatever its text (a Pix key, a one-time code, a private key). */
const SECRET_FIELD = /secret|password|private_key$|token$|^key$|^api_key$|code_verifier|^code$|auth_code/;
export function redact(v: unknown): unknown {
  if (typeof v === 'string') {
    const m = SECRET.exec(v);
    return m ? `${m[1]!.startsWith('ey') ? '' : m[1]}EXAMPLE_ONLY_NOT_A_REAL_SECRET` : v;
  }
  if (Array.isArray(v)) return v.map(redact);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, SECRET_FIELD.test(k) && typeof x === 'string' ? (/^\d+$/.test(x) ? '0'.repeat(x.length) : 'EXAMPLE_ONLY_NOT_A_REAL_SECRET') : redact(x)]));
  return v;
}

export type Violation = { operation: string; status: number; problem: string; body?: string };

type Doc = { paths: Record<string, Record<string, Json>> };
/** The document, its Ajv and the validators compiled from it: one per process, shared by every app checked against the same text. */
type Compiled = { text: string; doc: Doc; ajv: Ajv2020; validators: Map<string, ValidateFunction | null> };
let shared: Compiled | undefined;

/** The run's document (test/run.ts writes it once, from an app of the run's code), named to the files through the environment. */
export const OPENAPI_DOC_ENV = 'TEST_OPENAPI_DOC';

function compiledFor(text: string): Compiled {
  if (shared?.text === text) return shared;
  const doc = JSON.parse(text) as Doc;
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false, validateFormats: true });
  addFormats(ajv);
  ajv.addSchema(doc as unknown as Json, 'doc');
  return (shared = { text, doc, ajv, validators: new Map() });
}

export class ContractCheck {
  readonly violations: Violation[] = [];
  private doc: Doc | undefined;
  private ajv: Ajv2020 | undefined;
  private compiled = new Map<string, ValidateFunction | null>();

  /** Adds the onSend hook to an app being built (before its routes). */
  install(app: FastifyInstance): void {
    app.addHook('onSend', (req, reply, payload, done) => {
      try {
        this.check(req, reply, payload);
      } catch (err) {
        this.violations.push({ operation: `${req.method} ${req.url}`, status: reply.statusCode, problem: `the check failed: ${(err as Error).message}` });
      }
      done(null, payload);
    });
  }

  /**
   * The document the app serves, read once it is ready. In a run of the suite it is the run's
   * document (OPENAPI_DOC_ENV): the service generates it from its route declarations alone, the
   * same text whatever an app's options (test/http/openapi.test.ts), so each app does not generate
   * it again (~0.15 s of CPU an app, hundreds of apps a run). A file run alone asks its app.
   */
  async load(app: FastifyInstance): Promise<void> {
    const file = process.env[OPENAPI_DOC_ENV];
    const text = file ? readFileSync(file, 'utf8') : (await app.inject({ method: 'GET', url: '/openapi.json' })).body;
    ({ doc: this.doc, ajv: this.ajv, validators: this.compiled } = compiledFor(text));
  }

  /** CONTRACT_RECORD=<folder>: the first 2xx answer of each operation (its request body too) written there as its example (contracts/examples). */
  private record(operationId: string, status: number, req: FastifyRequest, text: string | undefined): void {
    const dir = process.env.CONTRACT_RECORD;
    if (!dir || status >= 300) return;
    const file = join(dir, `${operationId}.json`);
    const hasBody = req.body !== undefined && req.body !== null && typeof req.body === 'object';
    // Kept once recorded, unless it lacks the request body this answer had (an operation whose body is optional).
    if (existsSync(file) && (!hasBody || (JSON.parse(readFileSync(file, 'utf8')) as { request?: unknown }).request !== undefined)) return;
    let response: unknown;
    try {
      response = text === undefined ? undefined : JSON.parse(text);
    } catch {
      return;
    }
    // An answer without a JSON body (a 204) gives its request only.
    if (response === undefined && !hasBody) return;
    const example = { status, ...(hasBody ? { request: redact(req.body) } : {}), ...(response !== undefined ? { response: redact(response) } : {}) };
    writeFileSync(file, `${JSON.stringify(example, null, 2)}\n`);
  }

  private check(req: FastifyRequest, reply: FastifyReply, payload: unknown): void {
    if (!this.doc) return;
    const route = req.routeOptions?.url;
    if (!route) return;
    const path = route.replace(/:([A-Za-z_]+)/g, '{$1}');
    const method = req.method === 'HEAD' ? 'get' : req.method.toLowerCase();
    const op = this.doc.paths[path]?.[method] as { operationId: string; responses: Record<string, { content?: Record<string, unknown> }> } | undefined;
    if (!op) return;
    const status = reply.statusCode;
    const operation = `${op.operationId} (${req.method} ${path})`;
    const documented = op.responses[String(status)] ?? op.responses[`${String(status)[0]}XX`] ?? op.responses.default;
    const text = typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString('utf8') : undefined;
    if (!documented) {
      this.violations.push({ operation, status, problem: 'the status is not documented', ...(text !== undefined ? { body: text.slice(0, 300) } : {}) });
      return;
    }
    const type = String(reply.getHeader('content-type') ?? '');
    if (text === undefined || text === '' || !/json/.test(type) || req.method === 'HEAD') {
      if (req.method !== 'HEAD') this.record(op.operationId, status, req, undefined);
      return;
    }
    const key = `${method} ${path} ${status}`;
    let validate = this.compiled.get(key);
    if (validate === undefined) {
      const pointer = ['paths', path, method, 'responses', op.responses[String(status)] ? String(status) : `${String(status)[0]}XX`, 'content', 'application/json', 'schema'];
      const exists = (documented.content?.['application/json'] as Json | undefined)?.schema !== undefined;
      validate = exists ? this.ajv!.compile({ $ref: `doc#/${pointer.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}` }) : null;
      this.compiled.set(key, validate);
    }
    if (validate === null) {
      this.violations.push({ operation, status, problem: 'a JSON body where the document gives none', body: text.slice(0, 300) });
      return;
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return;
    }
    if (!validate(body)) {
      this.violations.push({ operation, status, problem: this.ajv!.errorsText(validate.errors, { separator: '; ' }), body: text.slice(0, 300) });
      return;
    }
    if (status === 400 || status === 422) this.checkRefusedRequest(op.operationId, path, method, status, req, body);
    this.record(op.operationId, status, req, text);
  }

  /**
   * A refused request body the document accepts: the service enforces a rule the
   * request schema does not state (a pattern, a length, an enum). Counted, not
   * failed, in `unstatedRules`; CONTRACT_RULES_LOG=<file> collects them for a run.
   */
  readonly unstatedRules: { operation: string; status: number; code: string; request: string }[] = [];
  private checkRefusedRequest(operationId: string, path: string, method: string, status: number, req: FastifyRequest, answer: unknown): void {
    const code = (answer as { error?: { code?: string } | string }).error;
    const name = typeof code === 'object' ? code?.code : code;
    if (name === 'invalid_json' || req.body === undefined || typeof req.body !== 'object' || req.body === null) return;
    const op = this.doc!.paths[path]![method] as { requestBody?: { content?: Record<string, { schema?: unknown }> } };
    if (!op.requestBody?.content?.['application/json']?.schema) return;
    const key = `request ${method} ${path}`;
    let validate = this.compiled.get(key);
    if (validate === undefined) {
      const pointer = ['paths', path, method, 'requestBody', 'content', 'application/json', 'schema'];
      validate = this.ajv!.compile({ $ref: `doc#/${pointer.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}` });
      this.compiled.set(key, validate);
    }
    if (!validate!(req.body)) return;
    const found = { operation: operationId, status, code: String(name ?? ''), request: JSON.stringify(redact(req.body)).slice(0, 300) };
    this.unstatedRules.push(found);
    if (process.env.CONTRACT_RULES_LOG) appendFileSync(process.env.CONTRACT_RULES_LOG, `${JSON.stringify(found)}\n`);
  }

  /** One line per distinct violation, for a failing assertion. */
  report(): string {
    const seen = new Map<string, number>();
    for (const v of this.violations) {
      const line = `${v.operation} ${v.status}: ${v.problem}${v.body ? ` — ${v.body}` : ''}`;
      seen.set(line, (seen.get(line) ?? 0) + 1);
    }
    return [...seen].map(([line, n]) => (n > 1 ? `${line} (×${n})` : line)).join('\n');
  }
}
