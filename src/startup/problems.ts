/**
 * A start-up failure that the operator fixes in the environment, not in the
 * code: a variable with a bad value, a port another process holds, an address
 * that is not this machine's, a data directory in use. The CLI exits 2 on one
 * (1 stays for failures at run time), and its message names the variable to
 * change.
 */
export class StartupProblem extends Error {
  override name = 'StartupProblem'
}
