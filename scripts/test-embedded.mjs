#!/usr/bin/env node
/**
 * `npm run test:embedded`: the test suite on the embedded defaults (PGlite,
 * the in-process broker, no Redis), with DATABASE_URL, REDIS_URL and MQTT_URL
 * removed, leaving out what test/embedded-subset.json lists (the one place
 * that subset is chosen). Extra arguments go to tap; it takes as many files at
 * a time as package.json says (`jobs`).
 */
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const { leftOut } = JSON.parse(readFileSync(join(root, 'test', 'embedded-subset.json'), 'utf8'))
const env = { ...process.env }
for (const name of ['DATABASE_URL', 'REDIS_URL', 'MQTT_URL']) delete env[name]
const exclude = `{${leftOut.map((entry) => entry.path).join(',')}}`
const child = spawn(process.execPath, [join(root, 'node_modules', '.bin', 'tap'), `--exclude=${exclude}`, ...process.argv.slice(2)], { cwd: root, env, stdio: 'inherit' })
child.on('exit', (code, signal) => process.exit(code ?? (signal === null ? 1 : 128)))
