import t from 'tap';
import { EventStoreDbStore } from '../../src/eventstore/eventstoredb.ts';
import { EsdbDouble } from '../../tools/esdb-double/server.ts';
import { conformance } from './conformance.ts';

// The conformance suite on EventStoreDB through the official client: against a
// real server when ESDB_URL is set (ESDB_URL=esdb://localhost:2113?tls=false),
// else against the protocol-level double on loopback (tools/esdb-double).
let url = process.env.ESDB_URL;
if (!url) {
  const double = await EsdbDouble.start();
  t.teardown(() => double.stop());
  url = double.url;
}
t.comment(`EventStoreDB conformance against ${process.env.ESDB_URL ? 'the server at ESDB_URL' : 'the protocol double'}: ${url}`);
const target = url;
conformance(t, { open: () => EventStoreDbStore.open(target) });
