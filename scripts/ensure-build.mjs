#!/usr/bin/env node
/**
 * `npm start` (and `npm run migrate`, `npm run bench`) run the compiled
 * service in dist/. It is built at install (the `prepare` script) and again
 * here only when a source file is newer than the last build, so a start on a
 * current build costs no compile (tsc takes tens of seconds on a small machine).
 *
 * "Newer" is by modification time against dist/.build-stamp, written after a
 * build that succeeded: a failed build leaves the stamp old, so the next start
 * tries again. `--force` builds whatever the times say. Without TypeScript (an
 * install that omitted dev dependencies) it runs the existing build; with
 * `--if-possible` (npm install's `prepare`) a missing compiler is no error.
 */
import { spawnSync } from 'node:child_process'
import { mkdirSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const stamp = join(root, 'dist', '.build-stamp')
const sourceDirs = ['protocol', 'machines', 'actors', 'src', 'bench']
const configFiles = ['tsconfig.json', 'tsconfig.build.json', 'package.json', 'package-lock.json']

function newestSource() {
  let newest = 0
  const visit = (dir) => {
    let entries
    try {
      entries = readdirSync(dir, { withFileTypes: true })
      // A folder's time changes when a file in it is added, removed or renamed.
      newest = Math.max(newest, statSync(dir).mtimeMs)
    } catch {
      return
    }
    for (const entry of entries) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) visit(path)
      else if (entry.name.endsWith('.ts')) newest = Math.max(newest, statSync(path).mtimeMs)
    }
  }
  for (const dir of sourceDirs) visit(join(root, dir))
  for (const file of configFiles) {
    try {
      newest = Math.max(newest, statSync(join(root, file)).mtimeMs)
    } catch {
      // optional file
    }
  }
  return newest
}

function statSafe(path) {
  try {
    return statSync(path).mtimeMs
  } catch {
    return 0
  }
}

const builtAt = () => statSafe(stamp)

const force = process.argv.includes('--force')
if (!force && builtAt() >= newestSource()) process.exit(0)

process.stderr.write(force ? 'printfarm: building (tsc)…\n' : 'printfarm: sources changed since the last build; building (tsc)…\n')
const started = performance.now()
// The stamp gets the time the build began: a file saved while tsc runs is newer, and is built next time.
const began = new Date()
let tsc
try {
  tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc')
} catch {
  // An install without dev dependencies (npm ci --omit=dev) has no compiler: it runs what is built.
  const built = statSafe(join(root, 'dist', 'src', 'cli.js')) !== 0
  process.stderr.write(
    built
      ? 'printfarm: TypeScript is not installed (dev dependencies omitted); running the existing build in dist/\n'
      : 'printfarm: TypeScript is not installed (dev dependencies omitted) and there is no build in dist/; run npm install (with dev dependencies) once\n',
  )
  process.exit(built || process.argv.includes('--if-possible') ? 0 : 1)
}
const build = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { cwd: root, stdio: 'inherit' })
if (build.status !== 0) {
  process.stderr.write('printfarm: the build failed (see above); nothing was started\n')
  process.exit(build.status ?? 1)
}
mkdirSync(dirname(stamp), { recursive: true })
writeFileSync(stamp, `${began.toISOString()}\n`)
utimesSync(stamp, began, began)
process.stderr.write(`printfarm: built in ${((performance.now() - started) / 1000).toFixed(1)} s\n`)
