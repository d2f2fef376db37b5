// Money on the dashboard: integer minor units (decimal strings) shown in
// major units with the currency's own number of decimals (Intl's), by string
// arithmetic: never through a float.

export function minorDigits(currency: string): number {
  try {
    return new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2;
  } catch {
    return 2;
  }
}

/** "123456" BRL → "1,234.56 BRL". */
export function formatMinor(amountMinor: string, currency: string): string {
  const negative = amountMinor.startsWith('-');
  const digits = (negative ? amountMinor.slice(1) : amountMinor).replace(/^0+(?=\d)/, '');
  const d = minorDigits(currency);
  const padded = digits.padStart(d + 1, '0');
  const whole = padded.slice(0, padded.length - d).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  const frac = d > 0 ? `.${padded.slice(padded.length - d)}` : '';
  return `${negative ? '-' : ''}${whole}${frac} ${currency}`;
}
