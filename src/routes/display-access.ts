/**
 * Who may call the signal-profile and display routes (docs/displays.md), one
 * policy for both route files: members read (API
 * keys with fleet:read), admins mutate (fleet:write), and every request fault
 * answers 400 MQTT_DISPLAY_REQUEST_INVALID.
 */
export const read = { kind: 'organization', scope: 'fleet:read' } as const
export const mutate = { kind: 'organization', scope: 'fleet:write', admin: true } as const
export const invalidRequestCode = 'MQTT_DISPLAY_REQUEST_INVALID' as const
