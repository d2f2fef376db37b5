import t from 'tap';
import { PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { openDb } from '../../src/postgres/db.ts';
import { testDatabase } from '../helpers/db.ts';
import { conformance } from './conformance.ts';

const { url, db } = await testDatabase(t);
const extraDbs: ReturnType<typeof openDb>[] = [];
t.teardown(async () => {
  for (const d of extraDbs) await d.close();
});

conformance(t, {
  async open() {
    // Each instance has its own pool: a separate writer, as another process would be.
    const own = openDb(url, { max: 4 });
    extraDbs.push(own);
    return PostgresEventStore.open(own);
  },
});
void db;
