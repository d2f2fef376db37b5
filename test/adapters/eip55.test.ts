import t from 'tap';
import fc from 'fast-check';
import { getAddress } from 'viem';
import { isChecksummed } from '../../src/adapters/chain/signature.ts';

// The EIP-55 check is computed from its definition (so a process that never
// recovers a signature does not load viem); it must agree with viem's.

t.test("EIP-55's own examples", async (t) => {
  for (const a of ['0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed', '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359', '0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB', '0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb']) {
    t.ok(isChecksummed(a), a);
    t.notOk(isChecksummed(a.toLowerCase()), `${a} in lower case`);
  }
  for (const a of ['0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAe', '5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed0x', '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeg', '']) t.notOk(isChecksummed(a), JSON.stringify(a));
});

t.test("agrees with viem's getAddress on any address, in any letter case", async () => {
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 20, maxLength: 20 }), fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }), (bytes, upper) => {
      const hex = Buffer.from(bytes).toString('hex');
      const cased = `0x${[...hex].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join('')}`;
      return isChecksummed(cased) === (getAddress(cased) === cased) && isChecksummed(getAddress(`0x${hex}`));
    }),
    { numRuns: 2000 },
  );
});
