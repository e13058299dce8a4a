/**
 * The signal-profile authoring draft: what an admin edits. The
 * schema holds the documented bounds; the compiler (compiler.ts) enforces the
 * rules a schema cannot express.
 */
import { Type, type Static } from '@sinclair/typebox'
import { displayStatuses } from '../display-status.js'

const Channel = Type.Integer({ minimum: 0, maximum: 255 })
export const ChannelsSchema = Type.Object({ red: Channel, green: Channel, blue: Channel, white: Channel, cct: Channel }, { additionalProperties: false })
export type Channels = Static<typeof ChannelsSchema>

/** Decided here (leaves the cycle length open): one phase lasts 50 ms to 60 s, so a cycle of eight phases is at most 8 minutes. */
export const maxPhaseMs = 60_000
export const tickMs = 50

export const PhaseSchema = Type.Object(
  {
    durationMs: Type.Integer({ minimum: tickMs, maximum: maxPhaseMs, multipleOf: tickMs }),
    target: ChannelsSchema,
    transition: Type.Union([Type.Literal('step'), Type.Literal('linear')]),
  },
  { additionalProperties: false },
)

export const maxPhases = 8
export const ProgramSchema = Type.Object(
  {
    initial: ChannelsSchema,
    phases: Type.Array(PhaseSchema, { maxItems: maxPhases }),
    traversals: Type.Integer({ minimum: 0, maximum: 255, description: '0 = continuous, otherwise how many times the phases run.' }),
  },
  { additionalProperties: false },
)
export type Program = Static<typeof ProgramSchema>

export const PatternSchema = Type.Object(
  {
    id: Type.String({ maxLength: 64, pattern: '^[A-Za-z0-9_-]{1,64}$' }),
    name: Type.String({ maxLength: 200 }),
    program: ProgramSchema,
  },
  { additionalProperties: false },
)

const PatternId = Type.String({ maxLength: 64, pattern: '^[A-Za-z0-9_-]{1,64}$' })
export const staleModes = ['per_pixel', 'all_pixels', 'first_pixel'] as const

export const DraftSchema = Type.Object(
  {
    name: Type.String({ maxLength: 200 }),
    brightnessCap: Channel,
    patterns: Type.Array(PatternSchema, { minItems: 1, maxItems: 64 }),
    bindings: Type.Object(Object.fromEntries(displayStatuses.map((s) => [s, PatternId])) as Record<(typeof displayStatuses)[number], typeof PatternId>, { additionalProperties: false }),
    stale: Type.Object({ mode: Type.Union(staleModes.map((m) => Type.Literal(m))), pattern: PatternId }, { additionalProperties: false }),
  },
  { additionalProperties: false, title: 'SignalProfileDraft' },
)
export type Draft = Static<typeof DraftSchema>

const rgb = (red: number, green: number, blue: number): Channels => ({ red, green, blue, white: 0, cct: 0 })
const constant = (id: string, name: string, c: Channels) => ({ id, name, program: { initial: c, phases: [], traversals: 0 } })
const blink = (id: string, name: string, c: Channels, ms: number) => ({
  id,
  name,
  program: {
    initial: c,
    phases: [
      { durationMs: ms, target: rgb(0, 0, 0), transition: 'step' as const },
      { durationMs: ms, target: c, transition: 'step' as const },
    ],
    traversals: 0,
  },
})

/**
 * The draft a new profile starts with (POST /mqtt/profiles): RGB only, so it
 * runs on any controller with the capability; attention states blink.
 */
export function defaultDraft(name = 'Default'): Draft {
  return {
    name,
    brightnessCap: 200,
    patterns: [
      blink('runout', 'Filament runout: orange blink', rgb(255, 120, 0), 500),
      blink('error', 'Error: red fast blink', rgb(255, 0, 0), 250),
      {
        id: 'complete',
        name: 'Complete: green pulse',
        program: {
          initial: rgb(0, 160, 60),
          phases: [
            { durationMs: 1000, target: rgb(0, 40, 15), transition: 'linear' },
            { durationMs: 1000, target: rgb(0, 160, 60), transition: 'linear' },
          ],
          traversals: 0,
        },
      },
      constant('offline', 'Offline: dim grey', rgb(20, 20, 20)),
      constant('paused', 'Paused: yellow', rgb(255, 200, 0)),
      constant('running', 'Printing: blue', rgb(0, 80, 255)),
      constant('waiting', 'Ready: violet', rgb(140, 90, 255)),
      constant('idle', 'Idle: dim violet', rgb(40, 25, 70)),
      constant('unknown', 'Unknown: off', rgb(0, 0, 0)),
    ],
    bindings: {
      FILAMENT_RUNOUT: 'runout',
      ERROR: 'error',
      COMPLETE: 'complete',
      OFFLINE: 'offline',
      PAUSED: 'paused',
      RUNNING: 'running',
      WAITING: 'waiting',
      IDLE: 'idle',
      UNKNOWN: 'unknown',
    },
    stale: { mode: 'per_pixel', pattern: 'unknown' },
  }
}
