/**
 * The PostgreSQL a benchmark runs against: BENCH_DATABASE_URL, else DATABASE_URL, else the local
 * `test` database. Said on stderr (without its password), so a load tester sees which server the
 * figures are of; each benchmark works in a fresh schema of its own and drops it after.
 */
export function benchDatabaseUrl(bench: string): string {
  const chosen = process.env['BENCH_DATABASE_URL'] !== undefined ? 'BENCH_DATABASE_URL' : process.env['DATABASE_URL'] !== undefined ? 'DATABASE_URL' : undefined
  const url = chosen === undefined ? 'postgres://postgres@127.0.0.1:5432/test' : process.env[chosen]!
  const shown = new URL(url)
  if (shown.password !== '') shown.password = '***'
  process.stderr.write(`${bench}: PostgreSQL ${shown.toString()} (${chosen ?? 'neither BENCH_DATABASE_URL nor DATABASE_URL is set: the local test database'}), in a schema of its own, dropped after\n`)
  return url
}
