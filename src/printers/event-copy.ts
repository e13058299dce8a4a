/**
 * A flush's events as COPY text (src/printers/event-store.ts, on a real
 * PostgreSQL): PostgreSQL reads tab-separated lines far more cheaply than it
 * expands a JSON document into rows, and COPY inserts them into the log in
 * batches (PostgreSQL's multi-row heap insert) where INSERT ... SELECT
 * inserts one row at a time.
 *
 * The rows go straight into printer_events, in `eventCopyColumns` order. A
 * row the log refuses (a duplicate its actor no longer remembered, a value a
 * column refuses) fails the COPY and so the flush's transaction; the writer
 * learns it from the statement it sends behind the COPY and writes the flush
 * again by the JSON statement, which can skip duplicates and name the unit at
 * fault. The only text COPY could refuse before a row is a NUL character,
 * which `eventCopyText` answers with `undefined` before a byte is sent; a
 * JavaScript string always encodes as valid UTF-8, and request bodies with
 * unpaired surrogates are refused at the edge.
 */
import type { PrinterCommit } from '../../actors/printer-persistence.js'

/** The log's columns in the order of `eventCopyText`'s fields and of the JSON statement's (received_at takes its default). */
export const eventCopyColumns =
  'printer_id, organization_id, assignment_epoch, seqn, event_id, idempotency_key, event_type, host_id, occurred_at_ms, delivery_attempt, job_id, payload, applied'

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
 * The rows as UTF-8 bytes, one line per event in `eventCopyColumns` order,
 * or undefined when a text holds a NUL character (COPY would refuse the
 * whole flush). Written line by line into one buffer: a string of a whole
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
