import { EventStoreDbStore } from '../src/eventstore/eventstoredb.ts';
import { EsdbDouble } from '../tools/esdb-double/server.ts';

// `--store esdb` for the benchmarks: our EventStoreDB adapter through the
// official client, against the server at ESDB_URL or else the protocol double
// on loopback. Against the double the figures measure the adapter, the client
// and gRPC on loopback, not an EventStoreDB server.

export const storeArg = (): 'postgres' | 'esdb' => {
  const i = process.argv.indexOf('--store');
  const v = i >= 0 ? process.argv[i + 1] : process.argv.find((a) => a.startsWith('--store='))?.slice(8);
  if (v !== undefined && v !== 'esdb' && v !== 'postgres') throw new Error(`--store must be postgres or esdb, not ${v}`);
  return v ?? 'postgres';
};

export const ESDB_DISCLAIMER = process.env.ESDB_URL
  ? `\nEventStoreDB rows: the server at ${process.env.ESDB_URL.replace(/\/\/[^@/]*@/, '//')}, through our adapter and the official client.`
  : '\nEventStoreDB rows: the in-memory protocol double on loopback (tools/esdb-double), through our adapter and the official client.\nThey measure the adapter + client + gRPC, NOT a real EventStoreDB server (no disk, no replication).';

export async function esdbStoreForBench(): Promise<{ store: EventStoreDbStore; stop(): Promise<void> }> {
  const double = process.env.ESDB_URL ? undefined : await EsdbDouble.start({ systemEventEvery: 50 });
  const store = await EventStoreDbStore.open(process.env.ESDB_URL ?? double!.url);
  return {
    store,
    async stop() {
      await store.close();
      await double?.stop();
    },
  };
}
