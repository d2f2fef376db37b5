// The part of pg-copy-streams (COPY ... FROM STDIN for node-postgres) this service uses.
declare module 'pg-copy-streams' {
  import type { Writable } from 'node:stream';
  import type { Submittable } from 'pg';
  export function from(sql: string): Writable & Submittable;
}
