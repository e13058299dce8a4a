/**
 * `printfarm admin ...`: account repairs an operator makes on the server,
 * with the service's own configuration (DATABASE_URL, or the embedded store
 * in DATA_DIR). The way back in when the admin password is lost.
 */
import { ConfigError, loadConfig } from '../config.js'
import { createLogger } from '../log.js'
import { StartupProblem } from '../startup/problems.js'
import { openDatabase } from '../storage/database.js'
import { migrate } from '../storage/migrate.js'
import { migrations } from '../storage/migrations/index.js'
import { findUserForLogin, generatePassword, setPassword } from './accounts.js'

export const adminUsage = `usage: printfarm admin reset-password EMAIL
  Sets a new generated password for the account EMAIL, prints it, and ends every sign-in of that account.
  Uses the same environment as the service (DATABASE_URL, DATABASE_SCHEMA, DATA_DIR). The embedded database
  is one process's: stop the service first. Against PostgreSQL it also works while the service runs.
`

export interface CliOutput {
  out(text: string): void
  err(text: string): void
}

const processOutput: CliOutput = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
}

/** Exit codes: 0 done, 1 no such account, 2 usage or environment to fix. */
export async function runAdminCommand(argv: readonly string[], output: CliOutput = processOutput, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const [command, email, ...extra] = argv
  if (command !== 'reset-password' || email === undefined || extra.length > 0 || !/^[^\s@]+@[^\s@]+$/.test(email)) {
    output.err(adminUsage)
    return 2
  }
  let config
  try {
    config = loadConfig(env)
  } catch (error) {
    if (error instanceof ConfigError) {
      output.err(`printfarm: ${error.message}\n`)
      return 2
    }
    throw error
  }
  // Log lines go to stderr: stdout carries the new password alone.
  const logger = createLogger(config.logLevel === 'debug' ? 'debug' : 'warn', (line) => output.err(line + '\n'))
  let db
  try {
    db = await openDatabase(config, logger)
  } catch (error) {
    output.err(`printfarm: ${(error as Error).message}\n`)
    return error instanceof StartupProblem ? 2 : 1
  }
  try {
    await migrate(db.sql, config.databaseSchema, migrations, logger)
    const user = await findUserForLogin(db.sql, email)
    if (user === undefined) {
      output.err(`printfarm: no account has the email ${email}\n`)
      return 1
    }
    const password = generatePassword()
    await setPassword(db.sql, user.id, password)
    output.err(`printfarm: new password set for ${email}; every sign-in of the account has ended. Sign in with POST /v1/auth/login.\n`)
    output.out(`${password}\n`)
    return 0
  } finally {
    await db.close()
  }
}
