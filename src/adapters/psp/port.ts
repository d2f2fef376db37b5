// The PSP port (Pix payment service provider). One HTTP client serves the
// sandbox PSP on loopback and a live PSP alike; only base URL and client
// credentials differ. Shapes follow the Banco Central's Pix API (`cob`, `pix`,
// devolução, webhook) and a DICT-like key directory per account.

export type PspAccount = { account: string; branch: string; ispb: string };
export type PspKey = { key: string; keyType: string };
/** A `cob`; `location` (the payload URL, no scheme) and `pixCopiaECola` (the BR Code) as the PSP answered them, null when it gave none. */
export type PspCob = { txid: string; status: string; valor: string; chave: string; location: string | null; pixCopiaECola: string | null; pix: PspPix[] };
export type PspDevolution = { id: string; rtrId: string; valor: string; status: string };
export type PspPix = {
  endToEndId: string;
  txid: string | null;
  valor: string;
  horario: string;
  chave: string | null;
  /** `PIX_RECEBIDO` for an inbound Pix; `PIX_ENVIADO` for one the account sent. */
  tipo: string;
  account: string;
  devolucoes: PspDevolution[];
  /** How the payer initiated it: DICT (a key), QRDN (dynamic QR), QRES (static QR), MANU. */
  tipoIniciacao?: string | null;
  /** The PSP's own id of the movement. */
  idTransacao?: string | null;
};

/**
 * Why a call failed. `refused`: the PSP answered 4xx with a code (it did not
 * act). `unavailable`: it answered 5xx. `timeout`: no answer (it may have
 * acted). `unreachable`: the connection was refused (it did not act). `malformed`: it answered 2xx with a body we cannot read.
 * `not_configured`: no live PSP is configured.
 */
export class PspError extends Error {
  constructor(
    readonly reason: 'refused' | 'unavailable' | 'timeout' | 'unreachable' | 'malformed' | 'not_configured',
    message: string,
    readonly status: number | null = null,
    readonly code: string | null = null,
  ) {
    super(message);
  }
  /** True when the PSP may have acted on the request (no answer came back). */
  get outcomeUnknown(): boolean {
    return this.reason === 'timeout';
  }
}

export interface Psp {
  readonly name: string;
  /** HMAC secret of the PSP's notifications to us (Standard Webhooks). */
  readonly webhookSecret: string;
  openAccount(input: { document: string; name: string | null; verifyDocument: boolean }): Promise<PspAccount>;
  listKeys(account: string): Promise<PspKey[]>;
  /** Registers a key (EVP: `key` absent, the PSP draws a random UUID). */
  registerKey(account: string, input: { keyType: string; key?: string }): Promise<PspKey>;
  deleteKey(account: string, key: string): Promise<void>;
  /** PUT /cob/{txid}: a dynamic charge. */
  createCob(input: { txid: string; valor: string; chave: string; expiracao: number }): Promise<PspCob>;
  getCob(txid: string): Promise<PspCob>;
  /** GET /pix/{e2eid}; null when the PSP has no such movement. */
  getPix(e2eid: string): Promise<PspPix | null>;
  /** PUT /pix/{e2eid}/devolucao/{id}. */
  devolve(e2eid: string, id: string, valor: string): Promise<PspDevolution>;
  /** PUT /webhook: where the PSP notifies received Pix. */
  configureWebhook(url: string): Promise<void>;
  /** Sandbox only: a simulated payer pays a cob (txid) or a key; the PSP then notifies. */
  simulatePayment(input: { txid?: string; chave?: string; valor?: string; pixCopiaECola?: string; entregas?: number }): Promise<{ endToEndId: string; deliveries: number[] }>;
}

/** The stand-in for a live PSP that is not configured: every call says so. */
export class UnconfiguredPsp implements Psp {
  readonly name = 'live';
  readonly webhookSecret = '';
  private fail(): never {
    throw new PspError('not_configured', 'no live PSP is configured (PIX_PSP_URL, PIX_PSP_CLIENT_ID, PIX_PSP_CLIENT_SECRET, PIX_PSP_WEBHOOK_SECRET)');
  }
  openAccount = async () => this.fail();
  listKeys = async () => this.fail();
  registerKey = async () => this.fail();
  deleteKey = async () => this.fail();
  createCob = async () => this.fail();
  getCob = async () => this.fail();
  getPix = async () => this.fail();
  devolve = async () => this.fail();
  configureWebhook = async () => this.fail();
  simulatePayment = async () => this.fail();
}

/** The PSPs this process talks to: the sandbox (test keys) and the live one (live keys). */
export type PixDeps = { sandbox: Psp | undefined; live: Psp; timeoutMs?: number };
