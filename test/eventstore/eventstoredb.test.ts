import t from 'tap';
import { EventStoreDbStore } from '../../src/eventstore/eventstoredb.ts';
import { conformance } from './conformance.ts';

// Runs only against a real EventStoreDB: ESDB_URL=esdb://localhost:2113?tls=false
const url = process.env.ESDB_URL;
if (!url) {
  t.pass('ESDB_URL not set: the EventStoreDB conformance run is skipped');
} else {
  conformance(t, { open: () => EventStoreDbStore.open(url) });
}
