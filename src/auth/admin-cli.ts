/**
 * `printfarm admin ...`: account repairs an operator makes on the server,
 * with the service's own configuration (DATABASE_URL, or the embedded store
 * in DATA_DIR). The way back in when the admin password is lost.
 */
import type { Config } from '../node/config.js'
import { createLogger } from '../observability/log.js'
import { openDatabase } from '../storage/database.js'
import { migrate } from '../storage/migrate.js'
import { migrations } from '../storage/migrations/index.js'
import { findUserForLogin, generatePassword, setPassword } from './accounts.js'
import { setPasswordCost } from './passwords.js'
import { systemClock } from '../../actors/clock.js'

export const adminUsage = `usage: printfarm admin reset-password EMAIL
  Sets a new generated password for the account EMAIL, prints it, and ends every sign-in of that account.
  Uses the same environment as the service (DATABASE_URL, DATABASE_SCHEMA, DATA_DIR). The embedded database
  is one process's: stop the service first. Against PostgreSQL it also works while the service runs.
`

/** Exit codes: 0 done, 1 no such account, 2 usage or environment to fix. */
export async function runAdminCommand(argv: readonly string[], config: Config): Promise<number> {
  const [command, email, ...extra] = argv
  if (command !== 'reset-password' || email === undefined || extra.length > 0 || !/^[^\s@]+@[^\s@]+$/.test(email)) {
    process.stderr.write(adminUsage)
    return 2
  }
  // Log lines go to stderr: stdout carries the new password alone.
  const logger = createLogger(config.logLevel === 'debug' ? 'debug' : 'warn', { now: systemClock.now, sink: (line) => process.stderr.write(line + '\n') })
  // A store that cannot be opened (DATA_DIR in use: exit 2) is reported by the CLI like any start-up failure.
  setPasswordCost(config.passwordHashCost)
  const db = await openDatabase(config, logger, systemClock)
  try {
    await migrate(db.sql, config.databaseSchema, migrations, logger)
    const user = await findUserForLogin(db.sql, email)
    if (user === undefined) {
      process.stderr.write(`printfarm: no account has the email ${email}\n`)
      return 1
    }
    const password = generatePassword()
    await setPassword(db.sql, user.id, password, new Date(systemClock.now()))
    process.stderr.write(`printfarm: new password set for ${email}; every sign-in of the account has ended. Sign in with POST /v1/auth/login.\n`)
    process.stdout.write(`${password}\n`)
    return 0
  } finally {
    await db.close()
  }
}
