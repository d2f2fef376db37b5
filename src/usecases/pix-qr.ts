import QRCode from 'qrcode';

// The QR image of a BR Code, drawn by the `qrcode` package: PNG (inline as a
// data URI in a charge's answer, and served at the charge's qr-code URL) or
// SVG. Error correction M and a quiet zone of 4 modules, as scanners expect.

const OPTIONS = { errorCorrectionLevel: 'M', margin: 4 } as const;

export const qrPngDataUri = (brCode: string): Promise<string> => QRCode.toDataURL(brCode, { ...OPTIONS, type: 'image/png', scale: 6 });
export const qrPng = (brCode: string): Promise<Buffer> => QRCode.toBuffer(brCode, { ...OPTIONS, type: 'png', scale: 8 });
export const qrSvg = (brCode: string): Promise<string> => QRCode.toString(brCode, { ...OPTIONS, type: 'svg' });
