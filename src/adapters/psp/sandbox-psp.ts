import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { canonicalKey, documentType, KEY_TYPES, type KeyType, minorToValor, TXID, valorToMinor } from '../../../commands/pix-format.ts';
import { dynamicBrCode, readBrCode } from '../../../commands/pix-brcode.ts';
import { listenStable, type SandboxHome, StateFile } from '../sandbox-home.ts';

// The sandbox PSP: a small HTTP server on loopback speaking the protocol
// HttpPsp expects. Accounts with a DICT-like key directory, `cob` charges,
// received Pix with end-to-end ids, devolutions, and notifications to a
// configured webhook signed the Standard Webhooks way. A simulated payer
// (`POST /sandbox/pagamentos`) pays a cob or a key, which notifies us.
//
// Faults, set per operation by tests: `slow` (answer late), `5xx` (answer
// 503 with a provider code), `refuse` (answer 4xx with a provider code),
// `timeout_after` (act, then never answer: the uncertain case),
// `timeout_before` (never answer, without acting), `garbage`
// (act, then answer 200 with a body that is not JSON), `other_cob` (answer
// for a different cob). A fault applies `times` times (default 1).
//
// A cob is answered as a PSP answers it: with its `location` (a payload URL on
// this server, without scheme, `GET /qr/v2/{id}` needing no credential, as a
// payer's PSP fetches it) and `pixCopiaECola`, the dynamic BR Code naming that
// location, the account holder and the sandbox's city. The payload is served
// as plain JSON (a live PSP signs it as a JWS).

export const SANDBOX_ISPB = '99999008';
/** The city the sandbox gives every account holder in its BR Codes. */
export const SANDBOX_CITY = 'SAO PAULO';

export type PspOp = 'open' | 'list' | 'register' | 'delete' | 'cob' | 'get_cob' | 'pix' | 'devolve';
export type Fault = { kind: 'slow' | '5xx' | 'refuse' | 'timeout_before' | 'timeout_after' | 'garbage' | 'other_cob'; status?: number; code?: string; ms?: number; times?: number };

type Account = { conta: string; documento: string; nome: string | null; keys: Map<string, KeyType> };
type Cob = { txid: string; conta: string; chave: string; valor: string; status: string; criacao: string; expiracao: number; pix: string[]; locId: string };
type Devolution = { id: string; rtrId: string; valor: string; status: string; horario: { solicitacao: string; liquidacao: string } };
type Pix = { endToEndId: string; txid: string | null; valor: string; horario: string; chave: string | null; tipo: string; conta: string; infoPagador: string | null; devolucoes: Devolution[]; tipoIniciacao: string; idTransacao: string };

/** What the sandbox PSP keeps under DATA_DIR across restarts (the key directory and payload locations are derived). */
type Saved = { seq: number; accounts: (Omit<Account, 'keys'> & { keys: [string, KeyType][] })[]; cobs: Cob[]; pix: Pix[] };

const MAX_KEYS_CPF = 5;
const MAX_KEYS_CNPJ = 20;

export class SandboxPsp {
  readonly accounts = new Map<string, Account>();
  readonly dict = new Map<string, string>(); // key -> conta
  readonly cobs = new Map<string, Cob>();
  /** Payload locations: id → txid. */
  private readonly locations = new Map<string, string>();
  readonly pix = new Map<string, Pix>();
  readonly faults = new Map<PspOp, Fault>();
  /** Documents the sandbox's KYC refuses (a person the PSP will not onboard). */
  readonly refusedDocuments = new Set<string>();
  webhookUrl: string | null = null;
  readonly clientId = 'sandbox-psp-client';
  readonly clientSecret = `sbx_${randomBytes(16).toString('hex')}`;
  readonly webhookSecret = `whsec_${randomBytes(32).toString('base64')}`;
  /** Every authenticated call: `METHOD /path`. */
  readonly calls: string[] = [];
  /** Every notification attempt the sandbox made: status of our answer. */
  readonly deliveries: { id: string; status: number }[] = [];
  private server: http.Server | undefined;
  private readonly hanging = new Set<http.ServerResponse>();
  private seq = 0;
  url = '';
  private readonly state: StateFile<Saved> | undefined;

  /** With a home, the accounts, keys, charges and Pix survive a restart, on the same port. */
  constructor(private readonly opts: { home?: SandboxHome } = {}) {
    this.state = opts.home ? new StateFile<Saved>(opts.home, 'psp') : undefined;
    const saved = this.state?.load();
    if (saved) this.restore(saved);
  }

  private restore(s: Saved): void {
    this.seq = s.seq;
    for (const a of s.accounts) {
      this.accounts.set(a.conta, { ...a, keys: new Map(a.keys) });
      for (const [k] of a.keys) this.dict.set(k, a.conta);
    }
    for (const c of s.cobs) {
      this.cobs.set(c.txid, c);
      this.locations.set(c.locId, c.txid);
    }
    for (const p of s.pix) this.pix.set(p.endToEndId, p);
  }

  /** Writes the state file (no-op without a home); called after every request that may change something. */
  private persist(): void {
    this.state?.save({ seq: this.seq, accounts: [...this.accounts.values()].map((a) => ({ ...a, keys: [...a.keys] })), cobs: [...this.cobs.values()], pix: [...this.pix.values()] });
  }

  async start(port?: number): Promise<string> {
    this.server = http.createServer((req, res) =>
      void this.handle(req, res)
        .catch(() => this.send(res, 500, { codigo: 'ERRO_INTERNO' }))
        .finally(() => {
          if (req.method !== 'GET') this.persist();
        }),
    );
    const bound = port !== undefined ? await new Promise<number>((r) => this.server!.listen(port, '127.0.0.1', () => r((this.server!.address() as AddressInfo).port))) : await listenStable(this.server, this.opts.home, 'psp', 'the sandbox PSP');
    this.url = `http://127.0.0.1:${bound}`;
    return this.url;
  }

  async stop(): Promise<void> {
    for (const r of this.hanging) r.destroy();
    this.hanging.clear();
    this.server?.closeAllConnections();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }

  fault(op: PspOp, f: Fault | null): void {
    if (f) this.faults.set(op, f);
    else this.faults.delete(op);
  }

  private take(op: PspOp): Fault | undefined {
    const f = this.faults.get(op);
    if (!f) return undefined;
    const left = (f.times ?? 1) - 1;
    if (left <= 0) this.faults.delete(op);
    else f.times = left;
    return f;
  }

  private send(res: http.ServerResponse, status: number, body?: unknown): void {
    if (res.headersSent) return;
    res.writeHead(status, body !== undefined ? { 'content-type': 'application/json' } : {});
    res.end(body !== undefined ? JSON.stringify(body) : undefined);
  }

  /** New end-to-end id: E + ISPB + yyyyMMddHHmm + 11 alphanumerics. */
  private e2eid(now: Date): string {
    const p = (n: number, w = 2) => String(n).padStart(w, '0');
    const stamp = `${now.getUTCFullYear()}${p(now.getUTCMonth() + 1)}${p(now.getUTCDate())}${p(now.getUTCHours())}${p(now.getUTCMinutes())}`;
    const tail = randomBytes(16).toString('base64').replace(/[^A-Za-z0-9]/g, '').padEnd(11, '0').slice(0, 11);
    return `E${SANDBOX_ISPB}${stamp}${tail}`;
  }

  private pixView(p: Pix) {
    return { endToEndId: p.endToEndId, txid: p.txid, valor: p.valor, horario: p.horario, chave: p.chave, tipo: p.tipo, account: p.conta, infoPagador: p.infoPagador, devolucoes: p.devolucoes, tipoIniciacao: p.tipoIniciacao, idTransacao: p.idTransacao };
  }

  private location(c: Cob): string {
    return `${this.url.replace(/^https?:\/\//, '')}/qr/v2/${c.locId}`;
  }

  private cobView(c: Cob) {
    const location = this.location(c);
    const holder = this.accounts.get(c.conta)?.nome ?? `Conta ${c.conta}`;
    const pixCopiaECola = dynamicBrCode({ location, merchantName: holder, merchantCity: SANDBOX_CITY, amount: c.valor });
    return { calendario: { criacao: c.criacao, expiracao: c.expiracao }, txid: c.txid, revisao: 0, location, status: c.status, valor: { original: c.valor }, chave: c.chave, pixCopiaECola, pix: c.pix.map((e) => this.pixView(this.pix.get(e)!)) };
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    let raw = '';
    for await (const c of req) raw += c;
    const url = new URL(req.url ?? '/', this.url);
    const body = (raw ? JSON.parse(raw) : {}) as Record<string, unknown>;
    const m = req.method ?? 'GET';
    const p = url.pathname;

    // A payload location, fetched by the payer's PSP: no client credentials.
    let loc: RegExpExecArray | null;
    if (m === 'GET' && (loc = /^\/qr\/v2\/([a-f0-9]{32})$/.exec(p))) {
      const cob = this.cobs.get(this.locations.get(loc[1]!) ?? '');
      if (!cob) return this.send(res, 404, { codigo: 'LOCATION_INEXISTENTE' });
      return this.send(res, 200, { revisao: 0, calendario: { criacao: cob.criacao, apresentacao: new Date().toISOString(), expiracao: cob.expiracao }, txid: cob.txid, valor: { original: cob.valor }, chave: cob.chave, status: cob.status });
    }
    // The simulated world (a payer, an outbound Pix): no client credentials.
    if (m === 'POST' && p === '/sandbox/pagamentos') {
      const r = await this.simulatePayment(body);
      return this.send(res, 'codigo' in r ? 422 : 201, r);
    }
    if (m === 'POST' && p === '/sandbox/pix-enviados') {
      const conta = String(body.conta ?? '');
      if (!this.accounts.has(conta)) return this.send(res, 404, { codigo: 'CONTA_INEXISTENTE' });
      const e = this.e2eid(new Date());
      this.pix.set(e, { endToEndId: e, txid: null, valor: String(body.valor ?? '1.00'), horario: new Date().toISOString(), chave: null, tipo: 'PIX_ENVIADO', conta, infoPagador: null, devolucoes: [], tipoIniciacao: 'DICT', idTransacao: `mov_${randomBytes(8).toString('hex')}` });
      return this.send(res, 201, { endToEndId: e });
    }

    const basic = `Basic ${Buffer.from(`${this.clientId}:${this.clientSecret}`).toString('base64')}`;
    if (req.headers.authorization !== basic) return this.send(res, 401, { codigo: 'NAO_AUTORIZADO' });

    this.calls.push(`${m} ${p}`);
    const route = this.route(m, p);
    if (!route) return this.send(res, 404, { codigo: 'NAO_ENCONTRADO' });
    const fault = route.op ? this.take(route.op) : undefined;
    if (fault?.kind === 'slow') await new Promise((r) => setTimeout(r, fault.ms ?? 1_000));
    if (fault?.kind === '5xx') return this.send(res, fault.status ?? 503, { codigo: fault.code ?? 'SERVICO_INDISPONIVEL' });
    if (fault?.kind === 'refuse') return this.send(res, fault.status ?? 400, { codigo: fault.code ?? 'REQUISICAO_RECUSADA' });
    if (fault?.kind === 'timeout_before') {
      this.hanging.add(res);
      return;
    }
    const [status, answer] = route.run(body);
    if (fault?.kind === 'timeout_after' && status < 300) {
      this.hanging.add(res); // acted; the answer never comes
      return;
    }
    if (fault?.kind === 'garbage' && status < 300) {
      res.writeHead(200, { 'content-type': 'application/json' });
      return void res.end('<html>gateway</html>');
    }
    if (fault?.kind === 'other_cob' && status < 300 && answer && typeof answer === 'object' && 'txid' in answer) {
      return this.send(res, status, { ...answer, txid: `OTHER${String((answer as { txid: string }).txid).slice(5)}` });
    }
    return this.send(res, status, answer);
  }

  private route(m: string, p: string): { op: PspOp | null; run: (b: Record<string, unknown>) => [number, unknown?] } | undefined {
    let g: RegExpExecArray | null;
    if (m === 'PUT' && p === '/webhook') return { op: null, run: (b) => ((this.webhookUrl = String(b.webhookUrl ?? '')), [204]) };
    if (m === 'POST' && p === '/contas') return { op: 'open', run: (b) => this.openAccount(b) };
    if ((g = /^\/contas\/([^/]+)\/chaves$/.exec(p))) {
      const conta = decodeURIComponent(g[1]!);
      if (m === 'GET') return { op: 'list', run: () => this.listKeys(conta) };
      if (m === 'POST') return { op: 'register', run: (b) => this.registerKey(conta, b) };
    }
    if (m === 'DELETE' && (g = /^\/contas\/([^/]+)\/chaves\/([^/]+)$/.exec(p))) {
      const conta = decodeURIComponent(g[1]!);
      const chave = decodeURIComponent(g[2]!);
      return { op: 'delete', run: () => this.deleteKey(conta, chave) };
    }
    if ((g = /^\/cob\/([^/]+)$/.exec(p))) {
      const txid = decodeURIComponent(g[1]!);
      if (m === 'PUT') return { op: 'cob', run: (b) => this.createCob(txid, b) };
      if (m === 'GET') return { op: 'get_cob', run: () => (this.cobs.has(txid) ? [200, this.cobView(this.cobs.get(txid)!)] : [404, { codigo: 'COB_INEXISTENTE' }]) };
    }
    if (m === 'GET' && (g = /^\/pix\/([^/]+)$/.exec(p))) {
      const e = this.pix.get(decodeURIComponent(g[1]!));
      return { op: 'pix', run: () => (e ? [200, this.pixView(e)] : [404, { codigo: 'PIX_INEXISTENTE' }]) };
    }
    if (m === 'PUT' && (g = /^\/pix\/([^/]+)\/devolucao\/([^/]+)$/.exec(p))) {
      const e2e = decodeURIComponent(g[1]!);
      const id = decodeURIComponent(g[2]!);
      return { op: 'devolve', run: (b) => this.devolve(e2e, id, b) };
    }
    return undefined;
  }

  private openAccount(b: Record<string, unknown>): [number, unknown] {
    const doc = String(b.documento ?? '');
    if (!documentType(doc)) return [400, { codigo: 'DOCUMENTO_INVALIDO' }];
    if (b.verificarDocumento !== false && this.refusedDocuments.has(doc)) return [422, { codigo: 'KYC_RECUSADO' }];
    const existing = [...this.accounts.values()].find((a) => a.documento === doc);
    if (existing) return [200, { conta: existing.conta, agencia: '0001', ispb: SANDBOX_ISPB }];
    const conta = String(10_000_000 + ++this.seq * 7919).slice(-8);
    this.accounts.set(conta, { conta, documento: doc, nome: typeof b.nome === 'string' ? b.nome : null, keys: new Map() });
    return [201, { conta, agencia: '0001', ispb: SANDBOX_ISPB }];
  }

  private listKeys(conta: string): [number, unknown] {
    const a = this.accounts.get(conta);
    if (!a) return [404, { codigo: 'CONTA_INEXISTENTE' }];
    return [200, { chaves: [...a.keys].map(([chave, tipoChave]) => ({ chave, tipoChave })) }];
  }

  private registerKey(conta: string, b: Record<string, unknown>): [number, unknown] {
    const a = this.accounts.get(conta);
    if (!a) return [404, { codigo: 'CONTA_INEXISTENTE' }];
    const tipo = String(b.tipoChave ?? '') as KeyType;
    if (!KEY_TYPES.includes(tipo)) return [400, { codigo: 'TIPO_CHAVE_INVALIDO' }];
    const limit = documentType(a.documento) === 'CNPJ' ? MAX_KEYS_CNPJ : MAX_KEYS_CPF;
    if (a.keys.size >= limit) return [422, { codigo: 'ENTRY_LIMIT_EXCEEDED' }];
    let chave: string;
    if (tipo === 'EVP') {
      if (b.chave !== undefined) return [400, { codigo: 'CHAVE_NAO_PERMITIDA' }];
      chave = randomUUID();
    } else {
      const c = canonicalKey(tipo, String(b.chave ?? ''));
      if (!c.ok) return [400, { codigo: 'ENTRY_INVALID' }];
      chave = c.key;
      if ((tipo === 'CPF' || tipo === 'CNPJ') && chave !== a.documento) return [422, { codigo: 'ENTRY_KEY_OWNED_BY_DIFFERENT_PERSON' }];
      const owner = this.dict.get(chave);
      if (owner === conta) return [409, { codigo: 'ENTRY_ALREADY_EXISTS' }];
      if (owner) return [409, { codigo: 'ENTRY_LOCKED_BY_CLAIM' }];
    }
    a.keys.set(chave, tipo);
    this.dict.set(chave, conta);
    return [201, { chave, tipoChave: tipo }];
  }

  private deleteKey(conta: string, chave: string): [number, unknown?] {
    const a = this.accounts.get(conta);
    if (!a) return [404, { codigo: 'CONTA_INEXISTENTE' }];
    if (!a.keys.has(chave)) return [404, { codigo: 'ENTRY_NOT_FOUND' }];
    a.keys.delete(chave);
    this.dict.delete(chave);
    return [204];
  }

  private createCob(txid: string, b: Record<string, unknown>): [number, unknown] {
    if (!TXID.test(txid)) return [400, { codigo: 'TXID_INVALIDO' }];
    if (this.cobs.has(txid)) return [409, { codigo: 'TXID_DUPLICADO' }];
    const valor = (b.valor as { original?: string } | undefined)?.original ?? '';
    if (valorToMinor(valor) === null) return [400, { codigo: 'VALOR_INVALIDO' }];
    const chave = String(b.chave ?? '');
    const conta = this.dict.get(chave);
    if (!conta) return [400, { codigo: 'CHAVE_INEXISTENTE' }];
    const cob: Cob = { txid, conta, chave, valor, status: 'ATIVA', criacao: new Date().toISOString(), expiracao: Number((b.calendario as { expiracao?: number } | undefined)?.expiracao ?? 3600), pix: [], locId: randomBytes(16).toString('hex') };
    this.cobs.set(txid, cob);
    this.locations.set(cob.locId, txid);
    return [201, this.cobView(cob)];
  }

  private devolve(e2e: string, id: string, b: Record<string, unknown>): [number, unknown] {
    const p = this.pix.get(e2e);
    if (!p || p.tipo !== 'PIX_RECEBIDO') return [404, { codigo: 'PIX_INEXISTENTE' }];
    const existing = p.devolucoes.find((d) => d.id === id);
    if (existing) return [200, existing];
    const valor = valorToMinor(String(b.valor ?? ''));
    const paid = valorToMinor(p.valor)!;
    const returned = p.devolucoes.reduce((s, d) => s + valorToMinor(d.valor)!, 0n);
    if (valor === null || valor <= 0n) return [400, { codigo: 'VALOR_INVALIDO' }];
    if (returned + valor > paid) return [422, { codigo: 'VALOR_DEVOLUCAO_EXCEDIDO' }];
    const now = new Date().toISOString();
    const d: Devolution = { id, rtrId: `D${SANDBOX_ISPB}${randomBytes(11).toString('hex').slice(0, 23)}`, valor: minorToValor(valor), status: 'DEVOLVIDO', horario: { solicitacao: now, liquidacao: now } };
    p.devolucoes.push(d);
    return [201, d];
  }

  /**
   * A payer pays: a cob by txid (with its amount), or a key directly (with an
   * optional txid, as a static BR Code carries), or a BR Code (`pixCopiaECola`)
   * read as a payer's PSP reads it: a dynamic one's location resolved to its
   * cob, a static one's key, amount and txid. The PSP records the Pix and
   * notifies the webhook `entregas` times (default 1), each a new delivery.
   */
  async simulatePayment(input: Record<string, unknown>): Promise<{ endToEndId: string; deliveries: number[] } | { codigo: string }> {
    let b = input;
    if (typeof input.pixCopiaECola === 'string') {
      const code = readBrCode(input.pixCopiaECola);
      if (!code) return { codigo: 'BRCODE_INVALIDO' };
      if (code.location !== null) {
        const prefix = `${this.url.replace(/^https?:\/\//, '')}/qr/v2/`;
        const txid = code.location.startsWith(prefix) ? this.locations.get(code.location.slice(prefix.length)) : undefined;
        if (!txid) return { codigo: 'LOCATION_INEXISTENTE' };
        b = { ...input, txid };
      } else b = { ...input, chave: code.key, txid: code.txid ?? undefined, valor: code.amount ?? input.valor };
    }
    const txid = typeof b.txid === 'string' ? b.txid : null;
    const cob = txid ? this.cobs.get(txid) : undefined;
    const chave = cob?.chave ?? (typeof b.chave === 'string' ? b.chave : null);
    const conta = chave ? this.dict.get(chave) : undefined;
    if (!conta) return { codigo: 'CHAVE_INEXISTENTE' };
    const valor = cob?.valor ?? String(b.valor ?? '');
    if (valorToMinor(valor) === null) return { codigo: 'VALOR_INVALIDO' };
    const now = new Date();
    const e = this.e2eid(now);
    const pix: Pix = { endToEndId: e, txid, valor, horario: now.toISOString(), chave, tipo: 'PIX_RECEBIDO', conta, infoPagador: typeof b.infoPagador === 'string' ? b.infoPagador : null, devolucoes: [], tipoIniciacao: cob ? 'QRDN' : txid ? 'QRES' : 'DICT', idTransacao: `mov_${randomBytes(8).toString('hex')}` };
    this.pix.set(e, pix);
    if (cob) {
      cob.status = 'CONCLUIDA';
      cob.pix.push(e);
    }
    this.persist(); // recorded before anyone is told
    const deliveries: number[] = [];
    const times = Math.min(Number(b.entregas ?? 1), 10);
    // No webhook configured: the Pix is recorded and nobody is told (a lookup finds it).
    for (let i = 0; i < times && this.webhookUrl; i++) deliveries.push(await this.notify({ pix: [{ endToEndId: e, txid, valor, horario: pix.horario, chave, infoPagador: pix.infoPagador }] }));
    return { endToEndId: e, deliveries };
  }

  /** POSTs a notification to the webhook, signed (Standard Webhooks); the status of our answer. */
  async notify(payload: unknown, opts: { id?: string; at?: Date } = {}): Promise<number> {
    if (!this.webhookUrl) return 0;
    const id = opts.id ?? `msg_${randomBytes(12).toString('hex')}`;
    const at = opts.at ?? new Date();
    const body = JSON.stringify(payload);
    const signature = new Webhook(this.webhookSecret).sign(id, at, body);
    try {
      const res = await fetch(this.webhookUrl, { method: 'POST', headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': signature }, body, signal: AbortSignal.timeout(30_000) });
      await res.text();
      this.deliveries.push({ id, status: res.status });
      return res.status;
    } catch {
      this.deliveries.push({ id, status: 0 });
      return 0;
    }
  }
}
