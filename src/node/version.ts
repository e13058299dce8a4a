/** The service's own release; a test keeps it equal to package.json's version. */
export const serviceVersion = '0.1.0'
/** info.version of the OpenAPI document (docs/oauth.md). */
export const apiVersion = '1.0.0'
