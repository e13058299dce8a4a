#!/usr/bin/env node
/**
 * Part of `npm install` / `npm ci` (the `prepare` script): builds tap's Test class with the
 * plugins package.json names (`tap build`). A fresh install has tap's default set, which includes
 * its ts-node loader; tap rebuilds on its first run, but that run's own test processes still get
 * the default loaders on top of tsx, and the first `npm test` of a fresh clone took twice as long
 * (14:34 against 7:46 for the real-services suite on a two-core machine). Without tap (an install
 * that omitted dev dependencies) there is nothing to build; a failed build is only a warning: tap
 * rebuilds itself on its first run anyway.
 */
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const tap = join(root, 'node_modules', '.bin', 'tap')
if (existsSync(tap)) {
  const built = spawnSync(tap, ['build'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] })
  if (built.status !== 0) process.stderr.write(`printfarm: tap build failed (status ${built.status}); the first test run rebuilds it, more slowly\n`)
}
