import { parseEvent } from '../events/index.ts';
import type { Projection } from '../src/projector/projection.ts';

// Read models of monetized MCP servers: servers, their tools, paid calls (with
// the platform fee each accrued) and the sweep's transfers.

export const mcpProjection: Projection = {
  name: 'mcp',
  // 2: indexes for the dashboard's lists of a server's paid calls and sweep transfers (issue 56).
  version: 3,
  tables: {
    mcp_servers: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY,
      org_id text NOT NULL,
      project_id text NOT NULL,
      slug text NOT NULL,
      name text NOT NULL,
      description text NOT NULL,
      overview_md text NOT NULL,
      category text,
      consumer_id text,
      upstream_url text NOT NULL,
      upstream_auth_header text,
      upstream_auth_ref text,
      environment text NOT NULL,
      payto_kind text NOT NULL,
      payto_address text NOT NULL,
      platform_fee_bps int NOT NULL,
      tool_count int NOT NULL,
      active boolean NOT NULL,
      created_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    )`,
    mcp_tools: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY,
      server_id text NOT NULL,
      ordinal int NOT NULL,
      tool_name text NOT NULL,
      description text NOT NULL,
      pricing_model text NOT NULL,
      price text NOT NULL,
      price_atomic numeric NOT NULL,
      active boolean NOT NULL,
      position text COLLATE "C" NOT NULL,
      UNIQUE (server_id, tool_name)
    )`,
    mcp_calls: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY,
      server_id text NOT NULL,
      org_id text NOT NULL,
      tool_name text NOT NULL,
      environment text NOT NULL,
      payer text NOT NULL,
      price_atomic numeric NOT NULL,
      fee_atomic numeric NOT NULL,
      tx_hash text NOT NULL,
      status text NOT NULL,
      refundable boolean NOT NULL DEFAULT false,
      error text,
      created_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (server_id, created_at DESC, id DESC);
    CREATE INDEX ON ${t} (org_id, created_at)`,
    // A server's paid calls summed per UTC day as they are projected: the earnings chart reads a row a day, not every call.
    mcp_earnings_daily: (t) => `CREATE TABLE ${t} (
      server_id text NOT NULL,
      day date NOT NULL,
      org_id text NOT NULL,
      calls integer NOT NULL,
      price_atomic numeric NOT NULL,
      fee_atomic numeric NOT NULL,
      PRIMARY KEY (server_id, day)
    );
    CREATE INDEX ON ${t} (org_id, day)`,
    mcp_sweep_transfers: (t) => `CREATE TABLE ${t} (
      nonce text PRIMARY KEY,
      sweep_id text NOT NULL,
      org_id text NOT NULL,
      server_id text NOT NULL,
      source text NOT NULL,
      destination text NOT NULL,
      amount_atomic numeric NOT NULL,
      status text NOT NULL,
      tx_hash text,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (server_id, position DESC)`,
  },
  eventTypes: new Set(['mcp_server.created', 'mcp_server.updated', 'mcp_tool.updated', 'mcp_call.settled', 'mcp_call.completed', 'mcp_call.upstream_failed', 'mcp_sweep.transfer_intended', 'mcp_sweep.transfer_settled', 'mcp_sweep.transfer_failed']),
  async apply(tx, event, t) {
    const e = parseEvent(event.type, event.data);
    const pos = event.position;
    const org = (event.metadata as { org_id: string }).org_id;
    switch (e.type) {
      case 'mcp_server.created': {
        const d = e.data;
        await tx.query(
          `INSERT INTO ${t.mcp_servers} (id, org_id, project_id, slug, name, description, overview_md, category, consumer_id, upstream_url, upstream_auth_header, upstream_auth_ref, environment, payto_kind, payto_address, platform_fee_bps, tool_count, active, created_at, position)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, true, $18, $19) ON CONFLICT (id) DO NOTHING`,
          [d.server_id, d.org_id, d.project_id, d.slug, d.name, d.description, d.overview_md, d.category, d.consumer_id, d.upstream_url, d.upstream_auth?.header ?? null, d.upstream_auth?.vault_ref ?? null, d.environment, d.payto_kind, d.payto_address, d.platform_fee_bps, d.tools.length, d.at, pos],
        );
        for (const [i, tool] of d.tools.entries()) {
          await tx.query(
            `INSERT INTO ${t.mcp_tools} (id, server_id, ordinal, tool_name, description, pricing_model, price, price_atomic, active, position) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (id) DO NOTHING`,
            [tool.id, d.server_id, i, tool.tool_name, tool.description, tool.pricing_model, tool.price, tool.price_atomic, tool.active, pos],
          );
        }
        return;
      }
      case 'mcp_server.updated': {
        const c = e.data.changes;
        await tx.query(
          `UPDATE ${t.mcp_servers} SET active = coalesce($2, active), name = coalesce($3, name), description = coalesce($4, description), overview_md = coalesce($5, overview_md),
             category = CASE WHEN $6 THEN $7 ELSE category END, position = $8 WHERE id = $1 AND position < $8`,
          [e.data.server_id, c.active ?? null, c.name ?? null, c.description ?? null, c.overview_md ?? null, c.category !== undefined, c.category ?? null, pos],
        );
        return;
      }
      case 'mcp_tool.updated': {
        const c = e.data.changes;
        await tx.query(
          `UPDATE ${t.mcp_tools} SET active = coalesce($3, active), description = coalesce($4, description), price = coalesce($5, price), price_atomic = coalesce($6::numeric, price_atomic), position = $7
           WHERE server_id = $1 AND tool_name = $2 AND position < $7`,
          [e.data.server_id, e.data.tool_name, c.active ?? null, c.description ?? null, c.price ?? null, c.price_atomic ?? null, pos],
        );
        return;
      }
      case 'mcp_call.settled': {
        const d = e.data;
        await tx.query(
          // The day's sums grow only when the call's row is new: applying the event again changes nothing.
          `WITH call AS (
             INSERT INTO ${t.mcp_calls} (id, server_id, org_id, tool_name, environment, payer, price_atomic, fee_atomic, tx_hash, status, created_at, position)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'settled', $10, $11) ON CONFLICT (id) DO NOTHING
             RETURNING server_id, org_id, price_atomic, fee_atomic, created_at)
           INSERT INTO ${t.mcp_earnings_daily} AS d (server_id, day, org_id, calls, price_atomic, fee_atomic)
             SELECT server_id, (created_at AT TIME ZONE 'UTC')::date, org_id, 1, price_atomic, fee_atomic FROM call
           ON CONFLICT (server_id, day) DO UPDATE SET calls = d.calls + 1, price_atomic = d.price_atomic + EXCLUDED.price_atomic, fee_atomic = d.fee_atomic + EXCLUDED.fee_atomic`,
          [d.call_id, d.server_id, d.org_id, d.tool_name, d.environment, d.payer, d.price_atomic, d.fee_atomic, d.tx_hash, d.at, pos],
        );
        return;
      }
      case 'mcp_call.completed':
        await tx.query(`UPDATE ${t.mcp_calls} SET status = 'completed', position = $2 WHERE id = $1 AND position < $2`, [e.data.call_id, pos]);
        return;
      case 'mcp_call.upstream_failed':
        await tx.query(`UPDATE ${t.mcp_calls} SET status = 'upstream_failed', refundable = true, error = $2, position = $3 WHERE id = $1 AND position < $3`, [e.data.call_id, e.data.error, pos]);
        return;
      case 'mcp_sweep.transfer_intended': {
        const d = e.data;
        await tx.query(
          `INSERT INTO ${t.mcp_sweep_transfers} (nonce, sweep_id, org_id, server_id, source, destination, amount_atomic, status, position) VALUES ($1, $2, $3, $4, $5, $6, $7, 'intended', $8) ON CONFLICT (nonce) DO NOTHING`,
          [d.nonce, d.sweep_id, org, d.server_id, d.source, d.destination, d.amount_atomic, pos],
        );
        return;
      }
      case 'mcp_sweep.transfer_settled':
      case 'mcp_sweep.transfer_failed':
        await tx.query(`UPDATE ${t.mcp_sweep_transfers} SET status = $2, tx_hash = $3, position = $4 WHERE nonce = $1 AND position < $4`, [
          e.data.nonce,
          e.type === 'mcp_sweep.transfer_settled' ? 'settled' : 'failed',
          e.type === 'mcp_sweep.transfer_settled' ? e.data.tx_hash : null,
          pos,
        ]);
        return;
    }
  },
};
