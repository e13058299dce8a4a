/**
 * Status displays (docs/displays.md) and their signal-profile targets. Members read; admins mutate (403 ORG_ADMIN_REQUIRED). API
 * keys read with fleet:read and mutate with fleet:write.
 *
 * Routes that hand out a credential or publish to displays answer 503
 * MQTT_DISPLAY_NOT_CONFIGURED while the broker cannot enforce display topic
 * access (an external broker without the credential mechanism, README
 * "Status displays"): a credential no broker checks would be a false promise.
 */
import { Type } from '@sinclair/typebox'
import {
  AssignBody,
  CreateDisplayBody,
  DesiredActivationSchema,
  DisplaySchema,
  DisplayWithCredentialSchema,
  EmptyBody,
  IdParams,
  PatchDisplayBody,
} from '../../protocol/schemas/signal-profiles.js'
import { ServiceError } from '../../protocol/errors.js'
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import type { Services } from './route-context.js'
import { organizationOf } from '../auth/principal.js'
import { invalidRequestCode, mutate, read } from './display-access.js'
import { activationView } from '../displays/display-store.js'

/** What the status display routes use of the node. */
export type DisplaysContext = Pick<Services, 'displays'>

const tags = ['status displays']

function requireBroker(svc: DisplaysContext): void {
  if (!svc.displays.gateway.configured) {
    throw new ServiceError('MQTT_DISPLAY_NOT_CONFIGURED', 'the MQTT broker of this service does not enforce display credentials: on Mosquitto set MQTT_DISPLAY_CREDENTIALS=dynamic-security (docs/displays.md, "Status displays on Mosquitto")')
  }
}

export const listDisplaysRoute = defineRoute({
  method: 'GET',
  path: '/v1/mqtt/displays',
  operationId: 'listDisplays',
  summary: "The organization's status displays.",
  tags,
  auth: read,
  invalidRequestCode,
  schemas: {},
  responses: { 200: { description: 'Displays, oldest first.', schema: Type.Array(DisplaySchema) } },
  handler: async (req, svc: DisplaysContext) => ({ body: await svc.displays.store.list(organizationOf(req.principal)) }),
})

export const createDisplayRoute = defineRoute({
  method: 'POST',
  path: '/v1/mqtt/displays',
  operationId: 'registerDisplay',
  summary: 'Register a status display: its pixels (printer ids in order) and an MQTT credential for binding epoch 1.',
  description:
    'The password is in this response only (and in a rebind\'s): store it on the display. The display then connects with ' +
    '`username`/`password`, publishes its capabilities report, subscribes to `topics.profileConfig` and `topics.statusFeed`, ' +
    'and sends receipts on `topics.receipts`.',
  tags,
  auth: mutate,
  invalidRequestCode,
  schemas: { body: CreateDisplayBody },
  responses: { 201: { description: 'The display and its credential.', schema: DisplayWithCredentialSchema } },
  errors: ['MQTT_DISPLAY_NOT_CONFIGURED', 'mqtt_broker_unavailable'],
  handler: async (req, svc: DisplaysContext) => {
    requireBroker(svc)
    const { display, password } = await svc.displays.store.create(organizationOf(req.principal), req.body.name, req.body.pixels, (credential) =>
      svc.displays.gateway.grantCredential(credential),
    )
    svc.displays.changed(organizationOf(req.principal), display.id)
    return { status: 201, body: { ...display, credential: { credentialId: display.credentialId, username: display.username, password } } }
  },
})

export const getDisplayRoute = defineRoute({
  method: 'GET',
  path: '/v1/mqtt/displays/{id}',
  operationId: 'getDisplay',
  summary: 'One display: binding, capability, generation and topics.',
  tags,
  auth: read,
  invalidRequestCode,
  schemas: { params: IdParams },
  responses: { 200: { description: 'The display.', schema: DisplaySchema } },
  errors: ['display_not_found'],
  handler: async (req, svc: DisplaysContext) => ({ body: await svc.displays.store.get(organizationOf(req.principal), req.params.id) }),
})

export const patchDisplayRoute = defineRoute({
  method: 'PATCH',
  path: '/v1/mqtt/displays/{id}',
  operationId: 'updateDisplay',
  summary: 'Rename a display or change its pixels (the status feed follows at once).',
  tags,
  auth: mutate,
  invalidRequestCode,
  schemas: { params: IdParams, body: PatchDisplayBody },
  responses: { 200: { description: 'The display.', schema: DisplaySchema } },
  errors: ['display_not_found'],
  handler: async (req, svc: DisplaysContext) => {
    const display = await svc.displays.store.patch(organizationOf(req.principal), req.params.id, req.body)
    svc.displays.changed(organizationOf(req.principal), display.id)
    return { body: display }
  },
})

export const rebindDisplayRoute = defineRoute({
  method: 'POST',
  path: '/v1/mqtt/displays/{id}/rebind',
  operationId: 'rebindDisplay',
  summary: 'A new binding: the epoch rises, a new credential replaces the old one (revoked and disconnected at once).',
  description:
    'The target is cleared (generation 0 in the new binding) and the capability must be advertised again by the display under the ' +
    'new credential. The old binding\'s retained configuration is removed from the broker.',
  tags,
  auth: mutate,
  invalidRequestCode,
  emptyBodyAllowed: true,
  schemas: { params: IdParams, body: EmptyBody },
  responses: { 200: { description: 'The display and its new credential.', schema: DisplayWithCredentialSchema } },
  errors: ['display_not_found', 'MQTT_DISPLAY_NOT_CONFIGURED', 'mqtt_broker_unavailable', 'display_owner_unavailable'],
  handler: async (req, svc: DisplaysContext) => {
    requireBroker(svc)
    const organizationId = organizationOf(req.principal)
    const { username, password } = await svc.displays.rebind(req.params.id, organizationId)
    svc.displays.changed(organizationId, req.params.id)
    const display = await svc.displays.store.get(organizationId, req.params.id)
    return { body: { ...display, credential: { credentialId: display.credentialId, username, password } } }
  },
})

export const deleteDisplayRoute = defineRoute({
  method: 'DELETE',
  path: '/v1/mqtt/displays/{id}',
  operationId: 'deleteDisplay',
  summary: 'Remove a display: its credential stops working at once and its retained messages are removed.',
  tags,
  auth: mutate,
  invalidRequestCode,
  schemas: { params: IdParams },
  responses: { 200: { description: 'Removed.', schema: Type.Object({ success: Type.Literal(true) }) } },
  errors: ['display_not_found'],
  handler: async (req, svc: DisplaysContext) => {
    await svc.displays.remove(organizationOf(req.principal), req.params.id)
    return { body: { success: true as const } }
  },
})

export const listTargetsRoute = defineRoute({
  method: 'GET',
  path: '/v1/mqtt/profile-targets',
  operationId: 'listSignalProfileTargets',
  summary: 'The desired activation of every display that has one in its current binding.',
  tags,
  auth: read,
  invalidRequestCode,
  schemas: {},
  responses: { 200: { description: 'Targets.', schema: Type.Array(DesiredActivationSchema) } },
  handler: async (req, svc: DisplaysContext) => ({ body: await svc.displays.store.targetsOf(organizationOf(req.principal)) }),
})

export const getTargetRoute = defineRoute({
  method: 'GET',
  path: '/v1/mqtt/displays/{id}/profile',
  operationId: 'getDisplayProfile',
  summary: "A display's desired and applied activation.",
  tags,
  auth: read,
  invalidRequestCode,
  schemas: { params: IdParams },
  responses: { 200: { description: 'The target.', schema: DesiredActivationSchema } },
  errors: ['display_not_found', 'signal_profile_target_not_found'],
  handler: async (req, svc: DisplaysContext) => ({ body: await svc.displays.store.target(organizationOf(req.principal), req.params.id) }),
})

export const assignProfileRoute = defineRoute({
  method: 'POST',
  path: '/v1/mqtt/displays/{id}/profile',
  operationId: 'assignDisplayProfile',
  summary: 'Activate a published revision on a display: a new generation, persisted, then published retained at QoS 1.',
  description:
    'expectedBindingEpoch and expectedActivationGeneration must be the display\'s current ones (409 display_binding_epoch_conflict / ' +
    'signal_profile_activation_conflict, with the current value in the body). The display must have advertised the signal_profile ' +
    'capability in this binding, with limits the revision fits (409 signal_profile_capability_missing / _insufficient; nothing is ' +
    'published then). A rollback is an assignment of an older revision: it gets a new, higher generation. At most one new activation ' +
    'per display per second goes out; assignments inside that second coalesce to the newest.',
  tags,
  auth: mutate,
  invalidRequestCode,
  schemas: { params: IdParams, body: AssignBody },
  responses: { 200: { description: 'The target, sync_pending until the device applies it.', schema: DesiredActivationSchema } },
  errors: [
    'display_not_found',
    'signal_profile_revision_not_found',
    'display_binding_epoch_conflict',
    'signal_profile_activation_conflict',
    'signal_profile_capability_missing',
    'signal_profile_capability_insufficient',
    'MQTT_DISPLAY_NOT_CONFIGURED',
    'display_owner_unavailable',
  ],
  handler: async (req, svc: DisplaysContext) => {
    requireBroker(svc)
    const stored = await svc.displays.assign(req.params.id, {
      organizationId: organizationOf(req.principal),
      revisionId: req.body.profileRevisionId,
      expectedBindingEpoch: req.body.expectedBindingEpoch,
      expectedActivationGeneration: req.body.expectedActivationGeneration,
    })
    return { body: activationView(stored) }
  },
})

export const retryProfileRoute = defineRoute({
  method: 'POST',
  path: '/v1/mqtt/displays/{id}/profile/retry',
  operationId: 'retryDisplayProfile',
  summary: 'Resume delivery of a rejected or errored target (sync_pending again, published at once).',
  tags,
  auth: mutate,
  invalidRequestCode,
  emptyBodyAllowed: true,
  schemas: { params: IdParams, body: EmptyBody },
  responses: { 200: { description: 'The target.', schema: DesiredActivationSchema } },
  errors: ['display_not_found', 'signal_profile_target_not_found', 'signal_profile_target_healthy', 'MQTT_DISPLAY_NOT_CONFIGURED', 'display_owner_unavailable'],
  handler: async (req, svc: DisplaysContext) => {
    requireBroker(svc)
    return { body: activationView(await svc.displays.retry(req.params.id, organizationOf(req.principal))) }
  },
})

export const displayRoutes: readonly Route<RouteSchemas, DisplaysContext>[] = [
  listDisplaysRoute,
  createDisplayRoute,
  getDisplayRoute,
  patchDisplayRoute,
  rebindDisplayRoute,
  deleteDisplayRoute,
  listTargetsRoute,
  getTargetRoute,
  assignProfileRoute,
  retryProfileRoute,
]
