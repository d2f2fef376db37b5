// The BR Code ("Pix Copia e Cola"): the EMV QRCPS merchant-presented payload
// of the Banco Central's "Manual de Padrões para Iniciação do Pix". Fields are
// ID (2 digits), length (2 digits), value. A dynamic code carries the PSP's
// location URL (without scheme) and `***` as txid (the location's payload
// holds the txid); a static one carries the key and its own txid (up to 25
// letters and digits). Pure functions, shared by the sandbox PSP (which draws
// dynamic codes as a PSP does) and the charge route (static codes).

const GUI = 'br.gov.bcb.pix';

/** A static code's txid: 1 to 25 letters and digits (the manual's limit for field 62-05). */
export const STATIC_TXID = /^[A-Za-z0-9]{1,25}$/;

function field(id: string, value: string): string {
  if (value.length < 1 || value.length > 99) throw new Error(`BR Code field ${id} must hold 1 to 99 characters`);
  return `${id}${String(value.length).padStart(2, '0')}${value}`;
}

/** CRC16-CCITT-FALSE (poly 0x1021, init 0xFFFF), as four uppercase hex digits. */
export function crc16(text: string): string {
  let crc = 0xffff;
  for (const byte of Buffer.from(text, 'utf8')) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc.toString(16).toUpperCase().padStart(4, '0');
}

/** Name (≤ 25) and city (≤ 15): printable ASCII, accents dropped, spaces collapsed. */
export function emvText(raw: string, max: number, fallback: string): string {
  const t = raw
    .normalize('NFD')
    .replace(/\p{M}/gu, '')
    .replace(/[^\x20-\x7e]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, max)
    .trim();
  return t || fallback;
}

type Common = { merchantName: string; merchantCity: string; /** "12.34"; optional on a dynamic code (the location holds it). */ amount?: string };

function assemble(pointOfInitiation: '11' | '12', account: string, c: Common, txid: string): string {
  const body =
    field('00', '01') +
    field('01', pointOfInitiation) +
    field('26', account) +
    field('52', '0000') +
    field('53', '986') +
    (c.amount ? field('54', c.amount) : '') +
    field('58', 'BR') +
    field('59', emvText(c.merchantName, 25, 'RECEBEDOR')) +
    field('60', emvText(c.merchantCity, 15, 'BRASILIA')) +
    field('62', field('05', txid)) +
    '6304';
  return body + crc16(body);
}

/** A one-time dynamic code: the PSP's location URL (no scheme), txid `***`. */
export function dynamicBrCode(c: Common & { location: string }): string {
  return assemble('12', field('00', GUI) + field('25', c.location.replace(/^https?:\/\//, '')), c, '***');
}

/** A static code: the receiver's key and the charge's txid (or `***`). */
export function staticBrCode(c: Common & { key: string; txid: string | null }): string {
  if (c.txid !== null && !STATIC_TXID.test(c.txid)) throw new Error('a static BR Code txid is 1 to 25 letters and digits');
  return assemble('11', field('00', GUI) + field('01', c.key), c, c.txid ?? '***');
}

export type BrCodeFields = { key: string | null; location: string | null; amount: string | null; txid: string | null };

/** Reads a BR Code's fields (a payer's side), or null when it is not one: malformed fields, a wrong CRC, no Pix account information. */
export function readBrCode(code: string): BrCodeFields | null {
  const fields = (text: string): Map<string, string> | null => {
    const out = new Map<string, string>();
    for (let i = 0; i < text.length; ) {
      const id = text.slice(i, i + 2);
      const len = Number(text.slice(i + 2, i + 4));
      if (!/^\d{2}$/.test(id) || !/^\d{2}$/.test(text.slice(i + 2, i + 4)) || i + 4 + len > text.length) return null;
      out.set(id, text.slice(i + 4, i + 4 + len));
      i += 4 + len;
    }
    return out;
  };
  if (!/^[\x20-\x7e]+$/.test(code) || code.length < 8 || code.slice(-8, -4) !== '6304' || crc16(code.slice(0, -4)) !== code.slice(-4).toUpperCase()) return null;
  const top = fields(code);
  const account = top?.get('26') !== undefined ? fields(top.get('26')!) : null;
  if (!top || top.get('00') !== '01' || !account || account.get('00')?.toLowerCase() !== GUI) return null;
  const extra = top.get('62') !== undefined ? fields(top.get('62')!) : null;
  const txid = extra?.get('05') ?? null;
  return { key: account.get('01') ?? null, location: account.get('25') ?? null, amount: top.get('54') ?? null, txid: txid === '***' ? null : txid };
}
