/**
 * Signal profiles and their revisions (docs/displays.md). Members read;
 * admins mutate (403 ORG_ADMIN_REQUIRED). API keys read with fleet:read and
 * mutate with fleet:write. Every request fault is 400
 * MQTT_DISPLAY_REQUEST_INVALID naming the field.
 */
import {
  CompileBody,
  CompileResultSchema,
  CreateProfileBody,
  IdParams,
  PatchProfileBody,
  PublishBody,
  PutDraftBody,
  RevisionParams,
  SignalProfileDetailSchema,
  SignalProfileRevisionSchema,
  SignalProfileSummarySchema,
} from '../../protocol/schemas/signal-profiles.js'
import { compileDraft } from '../../protocol/signal-profile/compiler.js'
import { Type } from '@sinclair/typebox'
import { defineRoute, type Principal, type Route, type RouteSchemas } from '../http/route.js'
import type { Services } from './route-context.js'
import { organizationOf } from '../auth/principal.js'
import { invalidRequestCode, mutate, read } from './display-access.js'

/** What the signal profile routes use of the node. */
export type SignalProfilesContext = Pick<Services, 'profiles'>

const tags = ['signal profiles']

/** Who published a revision: the person, or the API key acting for the organization. */
const publisherOf = (p: Principal): string => (p.kind === 'member' || p.kind === 'oauth' ? p.userId : p.kind === 'api_key' ? `api_key:${p.keyId}` : 'unknown')

export const listProfilesRoute = defineRoute({
  method: 'GET',
  path: '/v1/mqtt/profiles',
  operationId: 'listSignalProfiles',
  summary: "The organization's signal profiles.",
  tags,
  auth: read,
  invalidRequestCode,
  schemas: {},
  responses: { 200: { description: 'Summaries, oldest first.', schema: Type.Array(SignalProfileSummarySchema) } },
  handler: async (req, svc: SignalProfilesContext) => ({ body: await svc.profiles.list(organizationOf(req.principal)) }),
})

export const createProfileRoute = defineRoute({
  method: 'POST',
  path: '/v1/mqtt/profiles',
  operationId: 'createSignalProfile',
  summary: 'A new profile, seeded with the default draft (RGB only, so it runs on any controller with the capability).',
  tags,
  auth: mutate,
  invalidRequestCode,
  schemas: { body: CreateProfileBody },
  responses: { 201: { description: 'The profile at draftRevision 1.', schema: SignalProfileDetailSchema } },
  handler: async (req, svc: SignalProfilesContext) => ({ status: 201, body: await svc.profiles.create(organizationOf(req.principal), req.body.name) }),
})

export const compileProfileRoute = defineRoute({
  method: 'POST',
  path: '/v1/mqtt/profiles/compile',
  operationId: 'compileSignalProfile',
  summary: 'Compile a draft without saving it: the bytes, their SHA-256 and what a controller needs to run them.',
  description:
    'Changes nothing, so members may call it too (a preview while editing). Decoded size 29-750 bytes, base64 at most 1,000 characters. ' +
    'A draft that breaks a rule is 400 MQTT_DISPLAY_REQUEST_INVALID naming the field (the rules are in docs/displays.md, "Signal profiles").',
  tags,
  auth: read,
  invalidRequestCode,
  schemas: { body: CompileBody },
  responses: { 200: { description: 'The compiled profile.', schema: CompileResultSchema } },
  handler: (req) => {
    const compiled = compileDraft(req.body.draft)
    return { body: { byteLength: compiled.byteLength, sha256: compiled.sha256, data: compiled.base64, capabilityRequirements: compiled.requirements } }
  },
})

export const getProfileRoute = defineRoute({
  method: 'GET',
  path: '/v1/mqtt/profiles/{id}',
  operationId: 'getSignalProfile',
  summary: 'One profile with its draft.',
  tags,
  auth: read,
  invalidRequestCode,
  schemas: { params: IdParams },
  responses: { 200: { description: 'The profile.', schema: SignalProfileDetailSchema } },
  errors: ['signal_profile_not_found'],
  handler: async (req, svc: SignalProfilesContext) => ({ body: await svc.profiles.get(organizationOf(req.principal), req.params.id) }),
})

export const patchProfileRoute = defineRoute({
  method: 'PATCH',
  path: '/v1/mqtt/profiles/{id}',
  operationId: 'updateSignalProfile',
  summary: 'Rename, archive or unarchive; draftRevision rises by one.',
  description: 'expectedRevision must be the current draftRevision (409 signal_profile_revision_conflict, with the current draftRevision in the body).',
  tags,
  auth: mutate,
  invalidRequestCode,
  schemas: { params: IdParams, body: PatchProfileBody },
  responses: { 200: { description: 'The profile.', schema: SignalProfileDetailSchema } },
  errors: ['signal_profile_not_found', 'signal_profile_revision_conflict'],
  handler: async (req, svc: SignalProfilesContext) => ({ body: await svc.profiles.patch(organizationOf(req.principal), req.params.id, req.body) }),
})

export const putDraftRoute = defineRoute({
  method: 'PUT',
  path: '/v1/mqtt/profiles/{id}/draft',
  operationId: 'saveSignalProfileDraft',
  summary: 'Replace the draft; it must compile. draftRevision rises by one.',
  tags,
  auth: mutate,
  invalidRequestCode,
  schemas: { params: IdParams, body: PutDraftBody },
  responses: { 200: { description: 'The profile.', schema: SignalProfileDetailSchema } },
  errors: ['signal_profile_not_found', 'signal_profile_revision_conflict', 'signal_profile_archived'],
  handler: async (req, svc: SignalProfilesContext) => ({ body: await svc.profiles.saveDraft(organizationOf(req.principal), req.params.id, req.body.draft, req.body.expectedRevision) }),
})

export const publishProfileRoute = defineRoute({
  method: 'POST',
  path: '/v1/mqtt/profiles/{id}/publish',
  operationId: 'publishSignalProfile',
  summary: 'Compile the current draft into a new immutable revision.',
  description: 'Publishing a draftRevision that is already published returns that revision (a retried publish makes no duplicate).',
  tags,
  auth: mutate,
  invalidRequestCode,
  schemas: { params: IdParams, body: PublishBody },
  responses: { 200: { description: 'The revision.', schema: SignalProfileRevisionSchema } },
  errors: ['signal_profile_not_found', 'signal_profile_revision_conflict', 'signal_profile_archived'],
  handler: async (req, svc: SignalProfilesContext) => ({
    body: await svc.profiles.publish(organizationOf(req.principal), req.params.id, req.body.expectedRevision, publisherOf(req.principal)),
  }),
})

export const listRevisionsRoute = defineRoute({
  method: 'GET',
  path: '/v1/mqtt/profiles/{id}/revisions',
  operationId: 'listSignalProfileRevisions',
  summary: "A profile's published revisions, newest first.",
  tags,
  auth: read,
  invalidRequestCode,
  schemas: { params: IdParams },
  responses: { 200: { description: 'Revisions.', schema: Type.Array(SignalProfileRevisionSchema) } },
  errors: ['signal_profile_not_found'],
  handler: async (req, svc: SignalProfilesContext) => ({ body: await svc.profiles.revisions(organizationOf(req.principal), req.params.id) }),
})

export const getRevisionRoute = defineRoute({
  method: 'GET',
  path: '/v1/mqtt/revisions/{revisionId}',
  operationId: 'getSignalProfileRevision',
  summary: 'One published revision.',
  tags,
  auth: read,
  invalidRequestCode,
  schemas: { params: RevisionParams },
  responses: { 200: { description: 'The revision.', schema: SignalProfileRevisionSchema } },
  errors: ['signal_profile_revision_not_found'],
  handler: async (req, svc: SignalProfilesContext) => ({ body: await svc.profiles.revision(organizationOf(req.principal), req.params.revisionId) }),
})

export const signalProfileRoutes: readonly Route<RouteSchemas, SignalProfilesContext>[] = [
  listProfilesRoute,
  createProfileRoute,
  compileProfileRoute,
  getProfileRoute,
  patchProfileRoute,
  putDraftRoute,
  publishProfileRoute,
  listRevisionsRoute,
  getRevisionRoute,
]
