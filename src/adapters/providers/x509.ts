import { createPrivateKey, generateKeyPairSync, randomBytes, sign, X509Certificate, type KeyObject } from 'node:crypto';
import net from 'node:net';

// Minimal X.509 v3 issuance in-process (node:crypto has a parser but no
// issuer): a DER encoder for the few structures a certificate needs, EC P-256
// keys and ECDSA-SHA256 signatures. The sandbox provider server uses it for its
// test CA, its TLS certificate and the client certificates of sandbox accounts,
// so no openssl binary is needed at run time.

const len = (n: number): number[] => (n < 0x80 ? [n] : n < 0x100 ? [0x81, n] : n < 0x10000 ? [0x82, n >> 8, n & 255] : [0x83, n >> 16, (n >> 8) & 255, n & 255]);
const tlv = (tag: number, ...parts: Buffer[]) => {
  const body = Buffer.concat(parts);
  return Buffer.concat([Buffer.from([tag, ...len(body.length)]), body]);
};
const seq = (...parts: Buffer[]) => tlv(0x30, ...parts);
const set = (...parts: Buffer[]) => tlv(0x31, ...parts);
function int(bytes: Buffer): Buffer {
  let b = bytes;
  while (b.length > 1 && b[0] === 0 && b[1]! < 0x80) b = b.subarray(1);
  if (b[0]! >= 0x80) b = Buffer.concat([Buffer.from([0]), b]);
  return tlv(0x02, b);
}
function oid(dotted: string): Buffer {
  const [a, b, ...rest] = dotted.split('.').map(Number) as number[];
  const out = [a! * 40 + b!];
  for (const n of rest) {
    const stack = [n & 0x7f];
    for (let v = n >>> 7; v > 0; v >>>= 7) stack.unshift((v & 0x7f) | 0x80);
    out.push(...stack);
  }
  return tlv(0x06, Buffer.from(out));
}
function time(d: Date): Buffer {
  const iso = d.toISOString().replace(/[-:T]/g, '').slice(0, 14) + 'Z'; // YYYYMMDDHHMMSSZ
  return d.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(iso.slice(2))) : tlv(0x18, Buffer.from(iso));
}
const name = (cn: string, o: string) => seq(set(seq(oid('2.5.4.10'), tlv(0x0c, Buffer.from(o)))), set(seq(oid('2.5.4.3'), tlv(0x0c, Buffer.from(cn)))));
const ECDSA_SHA256 = seq(oid('1.2.840.10045.4.3.2'));
const ext = (id: string, critical: boolean, value: Buffer) => seq(oid(id), ...(critical ? [tlv(0x01, Buffer.from([0xff]))] : []), tlv(0x04, value));

export type Issued = { certPem: string; keyPem: string; key: KeyObject; cert: X509Certificate; subjectDer: Buffer };

const pem = (label: string, der: Buffer) => `-----BEGIN ${label}-----\n${der.toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n$/, '')}\n-----END ${label}-----\n`;

/**
 * Issues a certificate for a fresh P-256 key, signed by `issuer` (self-signed when absent).
 * `ca` marks a CA certificate; `altNames` are DNS names or IP addresses of a server.
 */
export function issueCertificate(opts: { commonName: string; organization?: string; issuer?: Issued; ca?: boolean; altNames?: string[]; notBefore?: Date; days?: number }): Issued {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const notBefore = opts.notBefore ?? new Date(Date.now() - 60_000);
  const notAfter = new Date(notBefore.getTime() + (opts.days ?? 365) * 86_400_000);
  const org = opts.organization ?? 'Sandbox Providers';
  const subject = name(opts.commonName, org);
  const issuerName = opts.issuer?.subjectDer ?? subject;
  const exts: Buffer[] = [ext('2.5.29.19', true, opts.ca ? seq(tlv(0x01, Buffer.from([0xff]))) : seq())];
  if (opts.ca) exts.push(ext('2.5.29.15', true, tlv(0x03, Buffer.from([0x01, 0x06])))); // keyCertSign, cRLSign
  if (opts.altNames?.length) {
    const names = opts.altNames.map((n) => (net.isIPv4(n) ? tlv(0x87, Buffer.from(n.split('.').map(Number))) : tlv(0x82, Buffer.from(n))));
    exts.push(ext('2.5.29.17', false, seq(...names)));
  }
  const serial = randomBytes(16);
  serial[0]! &= 0x7f;
  const tbs = seq(
    tlv(0xa0, int(Buffer.from([2]))),
    int(serial),
    ECDSA_SHA256,
    issuerName,
    seq(time(notBefore), time(notAfter)),
    subject,
    publicKey.export({ type: 'spki', format: 'der' }),
    tlv(0xa3, seq(...exts)),
  );
  const signature = sign('sha256', tbs, opts.issuer?.key ?? privateKey);
  const der = seq(tbs, ECDSA_SHA256, tlv(0x03, Buffer.from([0]), signature));
  const keyPem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  return { certPem: pem('CERTIFICATE', der), keyPem, key: createPrivateKey(keyPem), cert: new X509Certificate(der), subjectDer: subject };
}

/** An issued certificate as saved (PEM texts and the subject's DER), for a sandbox that keeps its CA across restarts. */
export type SavedIssued = { certPem: string; keyPem: string; subjectDer: string };

export const saveIssued = (i: Issued): SavedIssued => ({ certPem: i.certPem, keyPem: i.keyPem, subjectDer: i.subjectDer.toString('base64') });

export const loadIssued = (s: SavedIssued): Issued => ({ certPem: s.certPem, keyPem: s.keyPem, key: createPrivateKey(s.keyPem), cert: new X509Certificate(s.certPem), subjectDer: Buffer.from(s.subjectDer, 'base64') });
