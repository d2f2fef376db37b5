import t from 'tap';
import { canonicalAnyKey, canonicalKey, E2E_ID, isValidCnpj, isValidCpf, maskAccount, minorToValor, TXID, valorToMinor } from '../../commands/pix-format.ts';

// Published examples: 529.982.247-25 and 111.444.777-35 are the CPFs used to
// teach the check-digit algorithm; 00.000.000/0001-91 is Banco do Brasil's
// CNPJ and 33.000.167/0001-01 Petrobras'; 11.222.333/0001-81 the CNPJ of the
// Receita's algorithm walkthroughs.

t.test('CPF check digits', async (t) => {
  for (const v of ['529.982.247-25', '52998224725', '111.444.777-35', '123.456.789-09']) t.ok(isValidCpf(v), `${v} is valid`);
  for (const v of ['529.982.247-24', '529.982.247-15', '123.456.789-00', '111.111.111-11', '000.000.000-00', '5299822472', '529982247250', 'abc.def.ghi-jk']) t.notOk(isValidCpf(v), `${v} is invalid`);
});

t.test('CNPJ check digits', async (t) => {
  for (const v of ['00.000.000/0001-91', '33.000.167/0001-01', '11.222.333/0001-81', '11222333000181', '11.444.777/0001-61']) t.ok(isValidCnpj(v), `${v} is valid`);
  for (const v of ['11.222.333/0001-80', '11.222.333/0001-18', '12.345.678/0001-00', '00.000.000/0000-00', '11.111.111/1111-11', '1122233300018', '52998224725']) t.notOk(isValidCnpj(v), `${v} is invalid`);
});

t.test('every key-type rule', async (t) => {
  const ok = (type: Parameters<typeof canonicalKey>[0], raw: string, key: string) => t.same(canonicalKey(type, raw), { ok: true, key }, `${type} ${raw}`);
  const bad = (type: Parameters<typeof canonicalKey>[0], raw: string) => t.equal(canonicalKey(type, raw).ok, false, `${type} ${raw} refused`);
  ok('CPF', '529.982.247-25', '52998224725');
  ok('CPF', '52998224725', '52998224725');
  bad('CPF', '529.982.247-24');
  bad('CPF', '1234567890');
  bad('CPF', '11.222.333/0001-81');
  ok('CNPJ', '11.222.333/0001-81', '11222333000181');
  bad('CNPJ', '11.222.333/0001-82');
  bad('CNPJ', '52998224725');
  ok('EMAIL', ' Ana.Silva@Example.COM ', 'ana.silva@example.com');
  bad('EMAIL', 'ana@');
  bad('EMAIL', 'no-at-sign.example.com');
  bad('EMAIL', `${'a'.repeat(70)}@example.com`); // over 77 characters
  ok('PHONE', '+5511987654321', '+5511987654321');
  ok('PHONE', '+551133334444', '+551133334444');
  bad('PHONE', '11987654321'); // no +55
  bad('PHONE', '+14155552671'); // not Brazil
  bad('PHONE', '+5501987654321'); // area code cannot start with 0
  bad('PHONE', '+55119876543210');
  ok('EVP', '123E4567-E89B-42D3-A456-426614174000', '123e4567-e89b-42d3-a456-426614174000');
  bad('EVP', '123e4567-e89b-12d3-a456-426614174000'); // version 1, not random
  bad('EVP', 'not-a-uuid');
  t.equal(canonicalAnyKey(' 529.982.247-25 '), '52998224725');
  t.equal(canonicalAnyKey('Ana@Example.com'), 'ana@example.com');
});

t.test('txid, end-to-end id, amounts, account mask', async (t) => {
  t.ok(TXID.test('a'.repeat(26)));
  t.ok(TXID.test('A1'.repeat(17) + 'b'));
  t.notOk(TXID.test('a'.repeat(25)));
  t.notOk(TXID.test('a'.repeat(36)));
  t.notOk(TXID.test(`${'a'.repeat(25)}-`));
  t.equal('E99999008202611230915aB3dE5fG7h9'.length, 32);
  t.ok(E2E_ID.test('E99999008202611230915aB3dE5fG7h9'));
  t.notOk(E2E_ID.test('X99999008202611230915aB3dE5fG7h9'));
  t.equal(minorToValor(1234n), '12.34');
  t.equal(minorToValor(5n), '0.05');
  t.equal(valorToMinor('12.34'), 1234n);
  t.equal(valorToMinor('12.3'), null);
  t.equal(valorToMinor('1e3'), null);
  t.equal(maskAccount('12345678'), '****78');
});
