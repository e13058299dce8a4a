/**
 * Organizations and their members (docs/authentication.md). Any signed-in person may
 * create an organization and becomes its admin; admins add, re-role and remove
 * members. Another organization's id answers 404, exactly like a missing one.
 */
import { ServiceError } from '../../protocol/errors.js'
import {
  AddMemberBody,
  CreateOrganizationBody,
  MemberListSchema,
  MemberParams,
  MemberSchema,
  OrganizationListSchema,
  OrganizationParams,
  OrganizationSchema,
} from '../../protocol/schemas/accounts.js'
import { addMember, createOrganization, listMembers, membershipsOf, removeMember, roleIn, type Role } from '../auth/accounts.js'
import { userOf } from '../auth/principal.js'
import { defineRoute, type Route, type RouteSchemas } from '../http/route.js'
import type { Services } from './route-context.js'
import type { Queryable } from '../storage/database.js'

/** What the organization routes use of the node. */
export type OrganizationsContext = Pick<Services, 'db'>

/** The caller's role in the organization of the path; 404 when they are not in it (no existence leak). */
async function requireRole(sql: Queryable, userId: string, organizationId: string, needed: Role): Promise<Role> {
  const role = await roleIn(sql, userId, organizationId)
  if (role === undefined) throw new ServiceError('organization_not_found', 'no such organization among yours')
  if (needed === 'admin' && role !== 'admin') throw new ServiceError('ORG_ADMIN_REQUIRED', 'only an admin of the organization may do this')
  return role
}

export const createOrganizationRoute = defineRoute({
  method: 'POST',
  path: '/v1/organizations',
  operationId: 'createOrganization',
  summary: 'Create an organization; the caller becomes its admin.',
  tags: ['organizations'],
  auth: { kind: 'user' },
  schemas: { body: CreateOrganizationBody },
  responses: { 201: { description: 'Created.', schema: OrganizationSchema } },
  handler: async (req, svc: OrganizationsContext) => {
    const userId = userOf(req.principal)
    const org = await svc.db.sql.begin((tx) => createOrganization(tx, req.body.name, userId))
    return { status: 201, body: org }
  },
})

export const listOrganizationsRoute = defineRoute({
  method: 'GET',
  path: '/v1/organizations',
  operationId: 'listOrganizations',
  summary: "The caller's organizations, with their role in each.",
  tags: ['organizations'],
  auth: { kind: 'user' },
  schemas: {},
  responses: { 200: { description: 'Organizations.', schema: OrganizationListSchema } },
  handler: async (req, svc: OrganizationsContext) => {
    const memberships = await membershipsOf(svc.db.sql, userOf(req.principal))
    return { body: { organizations: memberships.map((m) => ({ id: m.organizationId, name: m.name, role: m.role })) } }
  },
})

export const addMemberRoute = defineRoute({
  method: 'POST',
  path: '/v1/organizations/{id}/members',
  operationId: 'addMember',
  summary: 'Add a person to the organization, or change their role (admins only).',
  description:
    'A new email becomes an account with the given password. An existing account is added without a password, and only by an admin of ' +
    'one of its organizations (409 user_exists otherwise): nobody sets another person\'s password or pulls a stranger into their organization. ' +
    'Demoting the last admin is refused (409 last_admin).',
  tags: ['organizations'],
  auth: { kind: 'user' },
  access: 'admin of the organization {id}',
  schemas: { params: OrganizationParams, body: AddMemberBody },
  responses: { 200: { description: 'The member.', schema: MemberSchema } },
  errors: ['organization_not_found', 'ORG_ADMIN_REQUIRED', 'user_exists', 'password_required', 'last_admin'],
  handler: async (req, svc: OrganizationsContext) => {
    const userId = userOf(req.principal)
    const member = await svc.db.sql.begin(async (tx) => {
      await requireRole(tx, userId, req.params.id, 'admin')
      return addMember(tx, req.params.id, req.body.email, req.body.password, req.body.role, userId)
    })
    return { body: member }
  },
})

export const listMembersRoute = defineRoute({
  method: 'GET',
  path: '/v1/organizations/{id}/members',
  operationId: 'listMembers',
  summary: 'The members of an organization (admins).',
  tags: ['organizations'],
  auth: { kind: 'user' },
  access: 'admin of the organization {id}',
  schemas: { params: OrganizationParams },
  responses: { 200: { description: 'Members.', schema: MemberListSchema } },
  errors: ['organization_not_found', 'ORG_ADMIN_REQUIRED'],
  handler: async (req, svc: OrganizationsContext) => {
    await requireRole(svc.db.sql, userOf(req.principal), req.params.id, 'admin')
    return { body: { members: await listMembers(svc.db.sql, req.params.id) } }
  },
})

export const removeMemberRoute = defineRoute({
  method: 'DELETE',
  path: '/v1/organizations/{id}/members/{userId}',
  operationId: 'removeMember',
  summary: 'Remove a member (admins only); the last admin cannot be removed.',
  tags: ['organizations'],
  auth: { kind: 'user' },
  access: 'admin of the organization {id}',
  schemas: { params: MemberParams },
  responses: { 204: { description: 'Removed.' } },
  errors: ['organization_not_found', 'ORG_ADMIN_REQUIRED', 'member_not_found', 'last_admin'],
  handler: async (req, svc: OrganizationsContext) => {
    const userId = userOf(req.principal)
    await svc.db.sql.begin(async (tx) => {
      await requireRole(tx, userId, req.params.id, 'admin')
      await removeMember(tx, req.params.id, req.params.userId)
    })
    return { status: 204 }
  },
})

export const organizationRoutes: readonly Route<RouteSchemas, OrganizationsContext>[] = [
  createOrganizationRoute,
  listOrganizationsRoute,
  addMemberRoute,
  listMembersRoute,
  removeMemberRoute,
]
