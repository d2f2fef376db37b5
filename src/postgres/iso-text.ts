/** SQL rendering a timestamptz column as the API's ISO 8601 text (UTC, milliseconds, Z). */
export const isoText = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
