import t from 'tap'
import { isActive, isFinal, jobStatuses, jobStatusRule, nextJobStatus, type JobStatus, type PrintJobEvent } from '../../machines/print-job.js'

/** Every event the machine knows, with each variant of its payload that changes the outcome. */
const events: Record<string, PrintJobEvent> = {
  DISPATCH: { type: 'DISPATCH' },
  OFFER_WITHDRAWN: { type: 'OFFER_WITHDRAWN' },
  START: { type: 'START' },
  PAUSE: { type: 'PAUSE' },
  RESUME: { type: 'RESUME' },
  'FINISH success': { type: 'FINISH', result: 'success' },
  'FINISH failed': { type: 'FINISH', result: 'failed' },
  'FINISH cancelled': { type: 'FINISH', result: 'cancelled' },
  'VERIFY success': { type: 'VERIFY', verdict: 'success' },
  'VERIFY failed': { type: 'VERIFY', verdict: 'failed' },
  'VERIFY cancelled': { type: 'VERIFY', verdict: 'cancelled' },
  'VERIFY skipped': { type: 'VERIFY', verdict: 'skipped' },
  CANCEL: { type: 'CANCEL' },
  REQUEUE: { type: 'REQUEUE' },
  'REQUEUE unconfirmed': { type: 'REQUEUE', taskUnconfirmed: true },
}

/** The whole table: what each event does in each status; a pair not listed is refused. */
const allowed: Record<JobStatus, Record<string, JobStatus>> = {
  queued: { DISPATCH: 'dispatching', CANCEL: 'cancelled' },
  dispatching: { START: 'printing', OFFER_WITHDRAWN: 'queued', CANCEL: 'cancelled', 'REQUEUE unconfirmed': 'queued' },
  printing: {
    PAUSE: 'paused',
    'FINISH success': 'awaiting_verification',
    'FINISH failed': 'awaiting_verification',
    'FINISH cancelled': 'cancelled',
    CANCEL: 'cancelled',
  },
  paused: {
    RESUME: 'printing',
    'FINISH success': 'awaiting_verification',
    'FINISH failed': 'awaiting_verification',
    'FINISH cancelled': 'cancelled',
    CANCEL: 'cancelled',
  },
  awaiting_verification: {
    'VERIFY success': 'succeeded',
    'VERIFY skipped': 'succeeded',
    'VERIFY failed': 'failed',
    'VERIFY cancelled': 'cancelled',
  },
  succeeded: {},
  failed: { REQUEUE: 'queued', 'REQUEUE unconfirmed': 'queued' },
  cancelled: { REQUEUE: 'queued', 'REQUEUE unconfirmed': 'queued' },
}

t.test('print job - every status and event: the allowed transitions lead where the table says, all others are refused', async (t) => {
  let checked = 0
  for (const status of jobStatuses) {
    for (const [name, event] of Object.entries(events)) {
      t.equal(nextJobStatus(status, event), allowed[status][name], `${status} + ${name}`)
      checked++
    }
  }
  t.equal(checked, jobStatuses.length * Object.keys(events).length)
})

t.test('print job - nothing leaves succeeded, and nothing is cancelled once it awaits verification except by the verdict', async (t) => {
  for (const event of Object.values(events)) t.equal(nextJobStatus('succeeded', event), undefined)
  t.equal(nextJobStatus('awaiting_verification', { type: 'CANCEL' }), undefined)
})

t.test('print job - a rule as data names every status an event applies in and its one target', async (t) => {
  t.same(jobStatusRule({ type: 'PAUSE' }), { from: ['printing'], to: 'paused' })
  t.same(jobStatusRule({ type: 'FINISH', result: 'success' }), { from: ['printing', 'paused'], to: 'awaiting_verification' })
  t.same(jobStatusRule({ type: 'FINISH', result: 'cancelled' }), { from: ['printing', 'paused'], to: 'cancelled' })
  t.same(jobStatusRule({ type: 'CANCEL' }), { from: ['queued', 'dispatching', 'printing', 'paused'], to: 'cancelled' })
  t.same(jobStatusRule({ type: 'REQUEUE' }), { from: ['failed', 'cancelled'], to: 'queued' })
  t.same(jobStatusRule({ type: 'START' }), { from: ['dispatching'], to: 'printing' })
  t.same(jobStatusRule({ type: 'REQUEUE', taskUnconfirmed: true }), { from: ['dispatching', 'failed', 'cancelled'], to: 'queued' })
  t.same(jobStatusRule({ type: 'VERIFY', verdict: 'skipped' }), { from: ['awaiting_verification'], to: 'succeeded' })
})

t.test('print job - active and final statuses', async (t) => {
  t.same(jobStatuses.filter(isActive), ['dispatching', 'printing', 'paused'])
  t.same(jobStatuses.filter(isFinal), ['succeeded', 'failed', 'cancelled'])
})
