/**
 * The static files of public/ (pages and their scripts), read once at start:
 * a few kilobytes each, served from memory.
 */
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** public/ sits at the package root: two levels up from src/routes, three from dist/src/routes. */
function publicDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (let i = 0; i < 5; i++) {
    if (existsSync(join(dir, 'public', 'farm.html'))) return join(dir, 'public')
    dir = dirname(dir)
  }
  throw new Error('public/farm.html not found next to the package')
}

const dir = publicDir()

export function publicFile(name: string): string {
  return readFileSync(join(dir, name), 'utf8')
}
