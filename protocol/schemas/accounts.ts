/**
 * Accounts (docs/authentication.md): sign-in, sessions, organizations, members.
 * Bodies are strict: an unknown field is a 400 naming it.
 */
import { Type, type Static } from '@sinclair/typebox'

const strict = { additionalProperties: false } as const

export const Email = Type.String({ minLength: 3, maxLength: 320, format: 'email', description: 'Email address (case-insensitive).' })
/** 12 characters at the least: long enough that the rate limits make guessing hopeless. */
export const NewPassword = Type.String({ minLength: 12, maxLength: 200, description: '12 to 200 characters.' })
export const Role = Type.Union([Type.Literal('admin'), Type.Literal('member')], { description: 'admin may change the organization; member may use it.' })
export const Uuid = Type.String({ format: 'uuid' })

export const LoginBody = Type.Object(
  {
    email: Email,
    // Any length is accepted at sign-in (up to a bound): the rules apply when a password is set.
    password: Type.String({ minLength: 1, maxLength: 200 }),
  },
  { ...strict, title: 'LoginRequest' },
)
export type LoginBody = Static<typeof LoginBody>

export const ChangePasswordBody = Type.Object(
  {
    current_password: Type.String({ minLength: 1, maxLength: 200 }),
    new_password: NewPassword,
  },
  { ...strict, title: 'ChangePasswordRequest' },
)
export type ChangePasswordBody = Static<typeof ChangePasswordBody>

export const RefreshBody = Type.Object({ refresh_token: Type.String({ minLength: 1, maxLength: 200 }) }, { ...strict, title: 'RefreshRequest' })
export type RefreshBody = Static<typeof RefreshBody>

export const TokenPairSchema = Type.Object(
  {
    access_token: Type.String({ description: 'ES256 JWT; send as Authorization: Bearer <token>.' }),
    token_type: Type.Literal('Bearer'),
    expires_in: Type.Integer({ description: 'Seconds until the access token expires.' }),
    refresh_token: Type.String({ description: 'Single use: each refresh returns a new one.' }),
  },
  { title: 'TokenPair' },
)

export const UserSchema = Type.Object({ id: Uuid, email: Type.String(), createdAt: Type.String({ format: 'date-time' }) }, { title: 'User' })

export const OrganizationSchema = Type.Object(
  { id: Uuid, name: Type.String(), role: Role, createdAt: Type.Optional(Type.String({ format: 'date-time' })) },
  { title: 'Organization' },
)

export const MeSchema = Type.Object({ user: UserSchema, organizations: Type.Array(OrganizationSchema) }, { title: 'Me' })

export const CreateOrganizationBody = Type.Object({ name: Type.String({ minLength: 1, maxLength: 200 }) }, { ...strict, title: 'CreateOrganizationRequest' })
export type CreateOrganizationBody = Static<typeof CreateOrganizationBody>

export const OrganizationListSchema = Type.Object({ organizations: Type.Array(OrganizationSchema) }, { title: 'OrganizationList' })

export const OrganizationParams = Type.Object({ id: Uuid })
export const MemberParams = Type.Object({ id: Uuid, userId: Uuid })

export const AddMemberBody = Type.Object(
  {
    email: Email,
    password: Type.Optional(NewPassword),
    role: Role,
  },
  {
    ...strict,
    title: 'AddMemberRequest',
    description: 'A new email becomes an account with this password; an existing account is added without one.',
  },
)
export type AddMemberBody = Static<typeof AddMemberBody>

export const MemberSchema = Type.Object(
  { userId: Uuid, email: Type.String(), role: Role, joinedAt: Type.String({ format: 'date-time' }) },
  { title: 'Member' },
)
export const MemberListSchema = Type.Object({ members: Type.Array(MemberSchema) }, { title: 'MemberList' })

export const JwksSchema = Type.Object({ keys: Type.Array(Type.Object({}, { additionalProperties: true })) }, { title: 'JWKS' })
