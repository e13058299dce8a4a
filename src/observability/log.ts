/**
 * Structured JSON logs, one line per event worth a person's attention
 * (STYLE practice 17: hot paths count in metrics instead).
 */
export const logLevels = ['debug', 'info', 'warn', 'error', 'silent'] as const
export type LogLevel = (typeof logLevels)[number]

const rank: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 }

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void
  info(msg: string, fields?: Record<string, unknown>): void
  warn(msg: string, fields?: Record<string, unknown>): void
  error(msg: string, fields?: Record<string, unknown>): void
  child(bindings: Record<string, unknown>): Logger
  readonly level: LogLevel
}

export type LogSink = (line: string) => void

const stdoutSink: LogSink = (line) => {
  process.stdout.write(line + '\n')
}

/** Where a logger's lines go and what time they carry. */
export interface LogOutput {
  /** The node's clock: a line carries the time the node reads (a test's simulated time included). */
  readonly now: () => number
  /** Standard output unless given. */
  readonly sink?: LogSink
}

export function createLogger(level: LogLevel, output: LogOutput, bindings: Record<string, unknown> = {}): Logger {
  const min = rank[level]
  const sink = output.sink ?? stdoutSink
  const emit = (lvl: Exclude<LogLevel, 'silent'>, msg: string, fields?: Record<string, unknown>): void => {
    if (rank[lvl] < min) return
    sink(JSON.stringify({ time: new Date(output.now()).toISOString(), level: lvl, msg, ...bindings, ...serialiseFields(fields) }))
  }
  return {
    level,
    debug: (msg, fields) => emit('debug', msg, fields),
    info: (msg, fields) => emit('info', msg, fields),
    warn: (msg, fields) => emit('warn', msg, fields),
    error: (msg, fields) => emit('error', msg, fields),
    child: (more) => createLogger(level, output, { ...bindings, ...more }),
  }
}

/** Errors do not survive JSON.stringify; keep their name, message, code and stack. */
function serialiseFields(fields: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (fields === undefined) return undefined
  let out: Record<string, unknown> | undefined
  for (const [key, value] of Object.entries(fields)) {
    if (value instanceof Error) {
      out ??= { ...fields }
      const code = (value as { code?: unknown }).code
      out[key] = { name: value.name, message: value.message, ...(code === undefined ? {} : { code }), stack: value.stack }
    }
  }
  return out ?? fields
}
