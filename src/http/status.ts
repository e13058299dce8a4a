/** uWS writes the status line verbatim, so it needs the reason phrase too. */
const reasons: Readonly<Record<number, string>> = {
  200: 'OK',
  201: 'Created',
  202: 'Accepted',
  204: 'No Content',
  301: 'Moved Permanently',
  302: 'Found',
  304: 'Not Modified',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  410: 'Gone',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  501: 'Not Implemented',
  503: 'Service Unavailable',
}

const lines = new Map<number, string>()

export function statusLine(status: number): string {
  let line = lines.get(status)
  if (line === undefined) {
    line = `${status} ${reasons[status] ?? 'Status'}`
    lines.set(status, line)
  }
  return line
}
