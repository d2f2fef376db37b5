import { PspError, type Psp, type PspAccount, type PspCob, type PspDevolution, type PspKey, type PspPix } from './port.ts';

// The HTTP PSP adapter. Pix API paths (`/cob/{txid}`, `/pix/{e2eid}`,
// `/pix/{e2eid}/devolucao/{id}`, `/webhook`) and a DICT-like key directory
// under `/contas/{conta}/chaves`. The sandbox PSP speaks the same protocol.

export type PspConfig = { baseUrl: string; clientId: string; clientSecret: string; webhookSecret: string; timeoutMs?: number };

type Answer = { status: number; json: unknown };

export class HttpPsp implements Psp {
  constructor(
    readonly name: string,
    private readonly cfg: PspConfig,
  ) {}

  get webhookSecret(): string {
    return this.cfg.webhookSecret;
  }

  private async call(method: string, path: string, body?: unknown, okStatuses: number[] = []): Promise<Answer> {
    const headers: Record<string, string> = { accept: 'application/json', authorization: `Basic ${Buffer.from(`${this.cfg.clientId}:${this.cfg.clientSecret}`).toString('base64')}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    let text: string;
    try {
      res = await fetch(new URL(path, this.cfg.baseUrl), { method, headers, body: body === undefined ? undefined : JSON.stringify(body), redirect: 'manual', signal: AbortSignal.timeout(this.cfg.timeoutMs ?? 10_000) });
      text = await res.text();
    } catch (err) {
      // Refused at connect: the request provably never reached the PSP. Any
      // other failure (a timeout, a reset) may come after the PSP acted.
      const code = ((err as Error).cause as { code?: string } | undefined)?.code;
      throw new PspError(code === 'ECONNREFUSED' ? 'unreachable' : 'timeout', `PSP ${this.name} did not answer`);
    }
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      if (res.status < 300) throw new PspError('malformed', `PSP ${this.name} answered ${res.status} with a body that is not JSON`, res.status);
      json = null;
    }
    if (res.status >= 400 && !okStatuses.includes(res.status)) {
      // Pix API problem details: {type, title, status, detail, violacoes}; DICT-like {codigo}.
      const j = json as { codigo?: unknown; type?: unknown } | null;
      const code = typeof j?.codigo === 'string' ? j.codigo : typeof j?.type === 'string' ? String(j.type).split('/').pop()! : null;
      throw new PspError(res.status >= 500 ? 'unavailable' : 'refused', `PSP ${this.name} answered ${res.status}${code ? ` ${code}` : ''}`, res.status, code);
    }
    return { status: res.status, json };
  }

  private shape<T>(json: unknown, ok: (j: T) => boolean, what: string): T {
    if (!json || typeof json !== 'object' || !ok(json as T)) throw new PspError('malformed', `PSP ${this.name} answered without ${what}`);
    return json as T;
  }

  async openAccount(input: { document: string; name: string | null; verifyDocument: boolean }): Promise<PspAccount> {
    const { json } = await this.call('POST', '/contas', { documento: input.document, nome: input.name, verificarDocumento: input.verifyDocument });
    const a = this.shape<{ conta: string; agencia: string; ispb: string }>(json, (j) => typeof j.conta === 'string' && typeof j.ispb === 'string', 'an account');
    return { account: a.conta, branch: a.agencia, ispb: a.ispb };
  }

  async listKeys(account: string): Promise<PspKey[]> {
    const { json } = await this.call('GET', `/contas/${encodeURIComponent(account)}/chaves`);
    const j = this.shape<{ chaves: { chave: string; tipoChave: string }[] }>(json, (j) => Array.isArray(j.chaves) && j.chaves.every((c) => typeof c?.chave === 'string' && typeof c?.tipoChave === 'string'), 'a key list');
    return j.chaves.map((c) => ({ key: c.chave, keyType: c.tipoChave }));
  }

  async registerKey(account: string, input: { keyType: string; key?: string }): Promise<PspKey> {
    const { json } = await this.call('POST', `/contas/${encodeURIComponent(account)}/chaves`, { tipoChave: input.keyType, ...(input.key !== undefined ? { chave: input.key } : {}) });
    const c = this.shape<{ chave: string; tipoChave: string }>(json, (j) => typeof j.chave === 'string' && typeof j.tipoChave === 'string', 'a key');
    return { key: c.chave, keyType: c.tipoChave };
  }

  async deleteKey(account: string, key: string): Promise<void> {
    await this.call('DELETE', `/contas/${encodeURIComponent(account)}/chaves/${encodeURIComponent(key)}`);
  }

  private cob(json: unknown): PspCob {
    const c = this.shape<{ txid: string; status: string; valor: { original: string }; chave: string; location?: unknown; pixCopiaECola?: unknown; pix?: PspPix[] }>(json, (j) => typeof j.txid === 'string' && typeof j.status === 'string' && typeof j.valor?.original === 'string', 'a cob');
    const text = (v: unknown) => (typeof v === 'string' && v.length > 0 ? v : null);
    return { txid: c.txid, status: c.status, valor: c.valor.original, chave: c.chave, location: text(c.location), pixCopiaECola: text(c.pixCopiaECola), pix: c.pix ?? [] };
  }

  async createCob(input: { txid: string; valor: string; chave: string; expiracao: number }): Promise<PspCob> {
    const { json } = await this.call('PUT', `/cob/${encodeURIComponent(input.txid)}`, { calendario: { expiracao: input.expiracao }, valor: { original: input.valor }, chave: input.chave });
    return this.cob(json);
  }

  async getCob(txid: string): Promise<PspCob> {
    return this.cob((await this.call('GET', `/cob/${encodeURIComponent(txid)}`)).json);
  }

  async getPix(e2eid: string): Promise<PspPix | null> {
    const { status, json } = await this.call('GET', `/pix/${encodeURIComponent(e2eid)}`, undefined, [404]);
    if (status === 404) return null;
    const p = this.shape<PspPix>(json, (j) => typeof j.endToEndId === 'string' && typeof j.valor === 'string' && typeof j.account === 'string', 'a Pix');
    return { ...p, txid: p.txid ?? null, chave: p.chave ?? null, tipo: p.tipo ?? 'PIX_RECEBIDO', devolucoes: p.devolucoes ?? [] };
  }

  async devolve(e2eid: string, id: string, valor: string): Promise<PspDevolution> {
    const { json } = await this.call('PUT', `/pix/${encodeURIComponent(e2eid)}/devolucao/${encodeURIComponent(id)}`, { valor });
    return this.shape<PspDevolution>(json, (j) => typeof j.id === 'string' && typeof j.status === 'string', 'a devolution');
  }

  async configureWebhook(url: string): Promise<void> {
    await this.call('PUT', '/webhook', { webhookUrl: url });
  }

  async simulatePayment(input: { txid?: string; chave?: string; valor?: string; pixCopiaECola?: string; entregas?: number }): Promise<{ endToEndId: string; deliveries: number[] }> {
    const { json } = await this.call('POST', '/sandbox/pagamentos', input);
    const j = json as { endToEndId?: string; deliveries?: number[]; codigo?: string };
    if (!j?.endToEndId) throw new PspError('refused', `PSP ${this.name} refused the payment`, 422, j?.codigo ?? null);
    return { endToEndId: j.endToEndId, deliveries: j.deliveries ?? [] };
  }
}
