#!/usr/bin/env node
// The operator and auditor CLI (src/cli.ts), runnable as `ledger ...` once installed.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli.ts');
