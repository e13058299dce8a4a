// Counts named tests in tap's TAP output for CI's closing line.
// A named test (t.test) ends with "# time=..." or carries a SKIP/TODO
// directive; plain assertions carry neither. A file that failed without any
// failing named test inside (a crash, a timeout) counts as one failure.
import { readFileSync } from 'node:fs'

let passed = 0
let failed = 0
let skipped = 0
for (const file of process.argv.slice(2)) {
  const lines = readFileSync(file, 'utf8').split('\n')
  let failedInFile = 0
  for (const line of lines) {
    const m = /^(\s*)(not ok|ok) \d+ - (.*)$/.exec(line)
    if (!m) continue
    const depth = m[1].length / 4
    const rest = m[3]
    const ok = m[2] === 'ok'
    if (depth === 0) {
      if (!ok && failedInFile === 0) failed++
      failedInFile = 0
      continue
    }
    if (/# SKIP/i.test(rest)) {
      skipped++
      continue
    }
    if (/# TODO/i.test(rest)) continue
    const named = /# time=/.test(rest) || /timeout!/.test(rest)
    if (!named) continue
    if (ok) passed++
    else {
      failed++
      failedInFile++
    }
  }
}
process.stdout.write(`${passed} ${failed} ${skipped}\n`)
