/**
 * A flush's events as COPY text (src/printers/event-store.ts, on a real
 * PostgreSQL): PostgreSQL reads tab-separated lines far more cheaply than it
 * expands a JSON document into rows. json_to_recordset was about 45% of the
 * database's CPU per stored event (perf of the backends under bench/ingest),
 * COPY then INSERT ... SELECT half of what the JSON statement took per row.
 *
 * The rows go into a temporary staging table of text columns only, then the
 * flush statement casts them into printer_events with every check it has
 * always made (fences, ON CONFLICT when tolerant). A COPY of text into text
 * columns has nothing to refuse, and it must not: postgres.js never settles
 * a COPY the server rejects after its data was sent, leaving the connection
 * in an aborted transaction (porsager/postgres#1173). The only text it
 * could refuse is a NUL character, which `eventCopyText` answers with
 * `undefined` before a byte is sent; a JavaScript string always encodes as
 * valid UTF-8, and request bodies with unpaired surrogates are refused at
 * the edge. A value the casts refuse fails the INSERT, an ordinary statement
 * error the flush handles as before.
 */
import type { PrinterCommit } from '../../actors/printer-persistence.js'

/** Session-local, emptied at every commit; created by the flush's own transaction when the connection lacks it. */
export const eventStageDdl = `
  create temp table if not exists printfarm_event_stage (
    p text, o text, a text, s text, e text, k text, t text, h text, at text, d text, j text, x text, ap text
  ) on commit delete rows`

/** The staged rows with the types of printer_events (the columns json_to_recordset names in the JSON path). */
export const stagedEvents = `
  select p::uuid as p, o::uuid as o, a::integer as a, s::bigint as s, e, k, t, h, at::double precision as at,
    d::integer as d, j::bigint as j, x::json as x, ap::boolean as ap
  from pg_temp.printfarm_event_stage`

const special = /[\\\t\n\r]/
const specials = /[\\\t\n\r]/g
const escapes: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' }

/** COPY's text format: backslash, tab and line ends escaped; `\N` is NULL. */
function field(value: string | null): string {
  if (value === null) return '\\N'
  return special.test(value) ? value.replace(specials, (c) => escapes[c]!) : value
}

/** JSON text holds no raw tab or line end (JSON.stringify escapes them), only backslashes to double. */
function jsonField(value: unknown): string {
  const json = JSON.stringify(value)
  return json.includes('\\') ? json.replaceAll('\\', '\\\\') : json
}

/**
 * The rows as UTF-8 bytes, one line per event in the staging table's column
 * order, or undefined when a text holds a NUL character (COPY would refuse
 * the whole flush). Written line by line into one buffer: a string of a whole
 * flush (hundreds of kilobytes) built by concatenation had to be flattened
 * and copied again to be sent, a sixth of the server's CPU under load.
 * Throws what JSON.stringify throws for data it cannot encode.
 */
export function eventCopyText(units: readonly PrinterCommit[]): Buffer | undefined {
  let bytes = Buffer.allocUnsafe(units.reduce((n, u) => n + u.events.length, 0) * 512 + 1024)
  let at = 0
  for (const u of units) {
    const head = `${u.printerId}\t${u.organizationId}\t${u.assignmentEpoch}\t`
    const host = field(u.hostId)
    for (const e of u.events) {
      const line = `${head}${e.seqn}\t${field(e.eventId)}\t${field(e.idempotencyKey)}\t${field(e.type)}\t${host}\t${e.timestamp}\t${e.deliveryAttempt}\t${e.jobId ?? '\\N'}\t${jsonField(e.data)}\t${e.applied}\n`
      // At most three bytes of UTF-8 per UTF-16 unit.
      if (bytes.length - at < line.length * 3) {
        const larger = Buffer.allocUnsafe(Math.max(bytes.length * 2, at + line.length * 3))
        bytes.copy(larger, 0, 0, at)
        bytes = larger
      }
      at += bytes.write(line, at)
    }
  }
  const rows = bytes.subarray(0, at)
  return rows.includes(0) ? undefined : rows
}
