import type { PrinterState } from '../../protocol/schemas/printer-state.js'

/** A whole read-model printer for tests that only care about a few fields. */
export function printerState(id: string, overrides: Partial<PrinterState> = {}): PrinterState {
  return {
    id,
    name: `printer ${id}`,
    printer_type: 'bambu',
    model: null,
    host_id: 'h',
    assignment_epoch: 1,
    last_seqn: null,
    online: true,
    last_seen_at: '2026-01-01T00:00:00.000Z',
    status: 'RUNNING',
    raw_status: 'x',
    maintenance: false,
    ready: true,
    ready_gate: 'open',
    error: null,
    job: null,
    temperatures: { nozzle: { actual: null, target: null }, bed: { actual: null, target: null }, chamber: { actual: null, target: null } },
    filaments: [],
    updated_at: '2026-01-01T00:00:00.000Z',
    ...overrides,
  }
}
