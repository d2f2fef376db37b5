import t from 'tap';
import { parseTimestamptz, timestamptzIso } from '../../src/postgres/db.ts';

// timestamptzIso writes the ISO text of a timestamptz without a Date when
// PostgreSQL wrote it in UTC; it must always equal what the default parser's
// Date gives (a raw row and a parsed row decode to the same recordedAt).

t.test('the same text as the parsed Date, for every way PostgreSQL writes a timestamptz', async (t) => {
  const texts = [
    '2026-11-21 12:34:56+00',
    '2026-11-21 12:34:56.5+00',
    '2026-11-21 12:34:56.29+00',
    '2026-11-21 12:34:56.999999+00',
    '2026-11-21 12:34:56.000001+00',
    '2026-11-21 23:59:59.9995+00',
    '0999-01-01 00:00:00.123+00',
    '2026-11-21 09:34:56.123456-03',
    '2026-11-21 18:04:56.123456+05:30',
    '2026-11-21 12:34:56.123+00 BC',
    '12026-11-21 12:34:56.123+00',
  ];
  for (const text of texts) t.equal(timestamptzIso(text), parseTimestamptz(text).toISOString(), text);
  // Every fraction of one second, as PostgreSQL writes it (trailing zeros dropped).
  let differ = 0;
  for (let f = 0; f < 1_000_000; f += 7) {
    const frac = String(f).padStart(6, '0').replace(/0+$/, '');
    const text = `2026-11-21 12:34:56${frac ? `.${frac}` : ''}+00`;
    if (timestamptzIso(text) !== parseTimestamptz(text).toISOString()) differ++;
  }
  t.equal(differ, 0, 'fractions agree');
});
