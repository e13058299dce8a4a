/**
 * `npm run bench`: runs every bench/*.bench.ts (compiled) in its own process,
 * one after another so they do not compete for the two cores. Each prints,
 * through bench/support/report.ts, a labelled line per measurement on stderr
 * and the same numbers as JSON lines on stdout. `npm run bench -- http-floor`
 * runs only the named ones.
 */
import { spawnSync } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { legend } from './support/report.js'

const dir = fileURLToPath(new URL('.', import.meta.url))
const only = process.argv.slice(2)
const benches = readdirSync(dir)
  .filter((f) => f.endsWith('.bench.js'))
  .filter((f) => only.length === 0 || only.some((name) => f.startsWith(name)))
  .sort()
process.stderr.write(legend + '\n')
let failed = 0
for (const file of benches) {
  process.stderr.write(`bench: ${file}\n`)
  const result = spawnSync(process.execPath, [fileURLToPath(new URL(file, import.meta.url))], { stdio: 'inherit' })
  if (result.status !== 0) {
    failed++
    process.stderr.write(`bench: ${file} exited ${result.status ?? result.signal}\n`)
  }
}
process.exit(failed ? 1 : 0)
