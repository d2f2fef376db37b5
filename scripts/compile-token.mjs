// Recompiles contracts/TestUSDC.sol with solc-js and writes its ABI and
// runtime bytecode to src/adapters/chain/test-usdc.json (committed, so the
// service and its tests never compile at run time).
//   npm run build:token
import { readFileSync, writeFileSync } from 'node:fs';
import solc from 'solc';

const source = readFileSync('contracts/TestUSDC.sol', 'utf8');
const input = {
  language: 'Solidity',
  sources: { 'TestUSDC.sol': { content: source } },
  settings: { optimizer: { enabled: true, runs: 200 }, evmVersion: 'cancun', outputSelection: { '*': { '*': ['abi', 'evm.deployedBytecode.object'] } } },
};
const out = JSON.parse(solc.compile(JSON.stringify(input)));
const errors = (out.errors ?? []).filter((e) => e.severity === 'error');
if (errors.length > 0) {
  for (const e of errors) console.error(e.formattedMessage);
  process.exit(1);
}
const c = out.contracts['TestUSDC.sol'].TestUSDC;
writeFileSync('src/adapters/chain/test-usdc.json', JSON.stringify({ compiler: solc.version(), abi: c.abi, deployedBytecode: `0x${c.evm.deployedBytecode.object}` }, null, 1) + '\n');
console.log(`compiled with solc ${solc.version()}`);
