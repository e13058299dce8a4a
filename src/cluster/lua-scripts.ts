/**
 * The Redis Lua scripts of the shard directory, one file per atomic operation
 * in src/cluster/lua/ (each with its KEYS / ARGV / result header), read once
 * and registered on a connection as commands: ioredis sends EVALSHA, and the
 * script's text only when Redis does not have it yet (after a restart or a
 * SCRIPT FLUSH). The files are found from this module's folder upwards, so the
 * compiled service in dist/ reads the same files as the sources.
 */
import type { Redis } from 'ioredis'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const luaScriptNames = ['heartbeat', 'renew', 'take', 'release'] as const
export type LuaScriptName = (typeof luaScriptNames)[number]

function luaDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (let up = 0; up < 5; up++) {
    for (const candidate of [join(dir, 'lua'), join(dir, 'src', 'cluster', 'lua')]) {
      if (existsSync(join(candidate, 'take.lua'))) return candidate
    }
    dir = dirname(dir)
  }
  throw new Error('src/cluster/lua/take.lua not found next to the package')
}

let texts: Readonly<Record<LuaScriptName, string>> | undefined

/** The scripts' texts, read on first use. */
export function luaScripts(): Readonly<Record<LuaScriptName, string>> {
  if (texts === undefined) {
    const dir = luaDir()
    texts = Object.fromEntries(luaScriptNames.map((name) => [name, readFileSync(join(dir, `${name}.lua`), 'utf8')])) as Record<LuaScriptName, string>
  }
  return texts
}

/** A connection with the scripts as commands: each takes the key count, the keys, then the arguments. */
export type ScriptedRedis = Redis & { [N in LuaScriptName]: (keyCount: number, ...keysThenArgs: (string | number)[]) => Promise<unknown> }

export function withLuaScripts(redis: Redis): ScriptedRedis {
  for (const [name, lua] of Object.entries(luaScripts())) redis.defineCommand(name, { lua })
  return redis as ScriptedRedis
}
