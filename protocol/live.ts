/**
 * The live feed's wire protocol: WebSocket `/v1/live`, frames as
 * JSON (subprotocol `printfarm.v1.json`, the default) or MessagePack
 * (`printfarm.v1.msgpack`, binary frames). Pure: schemas, topic names,
 * close codes.
 *
 * Client → server: `{op:'subscribe', topics, since?, stream?}`,
 * `{op:'unsubscribe', topics}`, `{op:'ping'}`.
 * Server → client: `{op, topic, seq, data}` with op snapshot | event | error
 * | pong. Every topic has its own `seq`, rising by one per event on this node's
 * stream (`stream` in every snapshot). A client that sees a gap missed
 * events; it resumes with `since: {topic: lastSeq}` and the snapshot's
 * `stream`: the node replays what it still buffers, else sends a fresh
 * snapshot.
 */
import { Type, type Static } from '@sinclair/typebox'

export const liveSubprotocols = ['printfarm.v1.json', 'printfarm.v1.msgpack'] as const
export type LiveEncoding = 'json' | 'msgpack'
/** Without a Sec-WebSocket-Protocol the feed speaks JSON (what a browser reads most easily). */
export const defaultSubprotocol = 'printfarm.v1.json'

/**
 * Topics of one organization. `printer:<id>` carries one printer's state and its stored events;
 * `host:<hostId>` the printer tasks offered to a bridge's host (docs/print-jobs.md); `queue` the first
 * waiting jobs of the smart queue, each with why it waits. A host id is
 * what GET /v1/hosts/{hostId}/printer-tasks accepts: 1-200 characters, any but U+0000, which
 * the store cannot keep (the route answers 400 for it). Not `.`, which would stop at a line
 * break; with ajv's `u` flag the class counts code points, as maxLength does.
 */
const TopicPattern = '^(printers|jobs|displays|queue|printer:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|host:[^\\u0000]{1,200})$'
export const maxTopicsPerFrame = 64
/** Topics one connection may hold at once. */
export const maxTopicsPerSocket = 256

const Topic = Type.String({ pattern: TopicPattern, description: 'printers, jobs, displays, queue, printer:<uuid> (lower case) or host:<hostId> (1-200 characters).' })
const Topics = Type.Array(Topic, { minItems: 1, maxItems: maxTopicsPerFrame, uniqueItems: true })

export const SubscribeFrameSchema = Type.Object(
  {
    op: Type.Literal('subscribe'),
    topics: Topics,
    since: Type.Optional(Type.Record(Type.String({ pattern: TopicPattern }), Type.Integer({ minimum: 0 }), { description: 'Last seq seen per topic, to resume.' })),
    stream: Type.Optional(Type.String({ maxLength: 100, description: "The `stream` of the snapshot the seqs belong to; another stream's seqs mean nothing here." })),
  },
  { additionalProperties: false },
)
export const UnsubscribeFrameSchema = Type.Object({ op: Type.Literal('unsubscribe'), topics: Topics }, { additionalProperties: false })
export const PingFrameSchema = Type.Object({ op: Type.Literal('ping') }, { additionalProperties: false })
export const ClientFrameSchema = Type.Union([SubscribeFrameSchema, UnsubscribeFrameSchema, PingFrameSchema], { title: 'LiveClientFrame' })
export type ClientFrame = Static<typeof ClientFrameSchema>

export const ServerFrameSchema = Type.Object(
  {
    op: Type.Union([Type.Literal('snapshot'), Type.Literal('event'), Type.Literal('error'), Type.Literal('pong')]),
    topic: Type.Optional(Type.String()),
    seq: Type.Optional(Type.Integer({ minimum: 0 })),
    data: Type.Optional(Type.Unknown()),
  },
  { title: 'LiveServerFrame' },
)
export interface ServerFrame {
  op: 'snapshot' | 'event' | 'error' | 'pong'
  topic?: string
  seq?: number
  data?: unknown
}

/** Largest client frame accepted (a subscribe with 64 topics and their seqs fits easily). */
export const maxClientFrameBytes = 16 * 1024

/** Close codes the service uses (4000-4999 are the application's). */
export const liveCloseCodes = {
  /** The node is shutting down: reconnect (another node, or this one once restarted). */
  goingAway: 1001,
  /** Frames that are not the protocol, repeatedly. */
  protocolError: 4002,
  /** The credential expired or was revoked while connected: sign in again, then reconnect. */
  credentialExpired: 4001,
  /** The client read too slowly for too long: reconnect and resubscribe (with `since`). */
  tooSlow: 4008,
} as const

export type TopicName = 'printers' | 'jobs' | 'displays' | 'queue' | `printer:${string}` | `host:${string}`
