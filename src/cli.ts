#!/usr/bin/env node
/**
 * The `printfarm` command. Exit codes: 0 done, 1 failed at run time,
 * 2 bad configuration or usage (fix the environment or the arguments: a bad
 * variable, a taken port, a HOST that is not this machine's, a DATA_DIR in use).
 */
import { ConfigError, loadConfig } from './node/config.js'
import { StartupProblem } from './startup/problems.js'
import { createLogger, type Logger } from './observability/log.js'
import { allRoutes, startService } from './node/service.js'
import { renderRouteTable } from './http/route-table.js'
import { openDatabase } from './storage/database.js'
import { migrate } from './storage/migrate.js'
import { migrations } from './storage/migrations/index.js'
import { serviceVersion } from './node/version.js'
import { runDisplaySim } from './simulators/display-sim-cli.js'
import { runBridgeSim } from './simulators/bridge-sim-cli.js'
import { runBridge } from './bridge/cli.js'
import { runMosquittoSetup } from './mqtt/setup-cli.js'
import { runAdminCommand } from './auth/admin-cli.js'
import { systemClock } from '../actors/clock.js'

const usage = `printfarm ${serviceVersion}: backend for 3D print farms

usage: printfarm [command]

commands:
  serve      run the service (default); configured by environment variables, see README
  migrate    apply pending database migrations and exit
  admin reset-password EMAIL  set and print a new password for an account (the way back in); see README
  routes     print every route with who may call it and the API key scope it needs
  bridge pair --url URL  pair this machine's bridge with the service (a code an admin confirms; see docs/bridge.md)
  bridge status  what this machine's bridge is paired with
  display-sim  run a simulated status display against a broker (see docs/displays.md)
  bridge-sim   run the reference bridge for one host against a running service (see docs/print-jobs.md)
  mosquitto-setup  create the service's MQTT user and role on Mosquitto's dynamic-security plugin (see docs/displays.md)
  version    print the version
  help       print this text
`

async function main(argv: readonly string[]): Promise<number> {
  const command = argv[0] ?? 'serve'
  if (command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(usage)
    return 0
  }
  if (command === 'version' || command === '--version') {
    process.stdout.write(`${serviceVersion}\n`)
    return 0
  }
  if (command === 'routes') {
    process.stdout.write(renderRouteTable(allRoutes()) + '\n')
    return 0
  }
  if (command === 'bridge') return runBridge(argv.slice(1))
  if (command === 'display-sim') return runDisplaySim(argv.slice(1))
  if (command === 'bridge-sim') return runBridgeSim(argv.slice(1))
  if (command === 'mosquitto-setup') return runMosquittoSetup(argv.slice(1))
  if (command !== 'serve' && command !== 'migrate' && command !== 'admin') {
    process.stderr.write(`printfarm: unknown command '${command}'\n\n${usage}`)
    return 2
  }

  let config
  try {
    config = loadConfig()
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`printfarm: ${error.message}\n`)
      return 2
    }
    throw error
  }
  if (command === 'admin') return runAdminCommand(argv.slice(1), config)
  const logger = createLogger(config.logLevel, { now: systemClock.now })
  process.on('uncaughtException', (error) => {
    logger.error('uncaught exception; exiting', { error })
    process.exit(1)
  })
  process.on('unhandledRejection', (error, promise) => {
    // A database query is its own promise (postgres.js): its text says which one nobody awaited.
    const strings = (promise as { strings?: unknown }).strings
    const query = Array.isArray(strings) ? strings.join('$?').replace(/\s+/g, ' ').slice(0, 300) : undefined
    logger.error('unhandled rejection; exiting', { error, ...(query === undefined ? {} : { query }) })
    process.exit(1)
  })

  if (command === 'migrate') {
    const db = await openDatabase(config, logger, systemClock)
    try {
      const result = await migrate(db.sql, config.databaseSchema, migrations, logger)
      logger.info('migrations done', { applied: result.applied, version: result.version })
    } finally {
      await db.close()
    }
    return 0
  }

  // Listened for before the start: a SIGTERM while the node starts (a deploy that changes its mind)
  // would otherwise end the process halfway, with parts up and nothing stopped.
  const stop = stopRequested(logger)
  let service
  try {
    service = await startService(config, { logger })
  } catch (error) {
    if (error instanceof StartupProblem) {
      logger.error('start-up failed', { error: error.message })
      process.stderr.write(`printfarm: ${error.message}\n`)
      return 2
    }
    throw error
  }
  logger.info('printfarm listening', {
    startupMs: service.startupMs,
    url: service.url,
    publicBaseUrl: config.publicBaseUrl,
    store: service.services.db.kind,
    dataDir: service.services.db.kind === 'pglite' ? config.dataDir : undefined,
    mqtt: service.services.mqtt.broker ? `mqtt://${config.host}:${service.services.mqtt.broker.port} (embedded)` : 'external (MQTT_URL)',
    version: serviceVersion,
  })
  stop.up()
  await stop.requested
  try {
    await service.stop()
    return 0
  } catch (error) {
    logger.error('shutdown failed', { error })
    return 1
  }
}

/**
 * SIGTERM or SIGINT asks the node to stop: at once when it is up, as soon as it is up when it is
 * still starting (a start cannot be undone halfway from outside it). A second signal exits without
 * draining.
 */
function stopRequested(logger: Logger): { requested: Promise<NodeJS.Signals>; up(): void } {
  let isUp = false
  let signalled = false
  let resolve!: (signal: NodeJS.Signals) => void
  const requested = new Promise<NodeJS.Signals>((r) => (resolve = r))
  const onSignal = (signal: NodeJS.Signals): void => {
    if (signalled) {
      logger.warn('second signal: exiting without draining', { signal })
      process.exit(130)
    }
    signalled = true
    logger.info(isUp ? 'signal received; draining' : 'signal received while starting; stopping as soon as the start ends', { signal })
    resolve(signal)
  }
  process.on('SIGTERM', onSignal)
  process.on('SIGINT', onSignal)
  return { requested, up: () => (isUp = true) }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`printfarm: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exit(error instanceof StartupProblem ? 2 : 1)
  },
)
