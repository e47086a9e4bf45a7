// Typed errors. Every error the SDK throws is a CorralError; those that the
// API answered carry its code, HTTP status and message (the message names
// the offending field).

/** Base of every error the SDK throws. */
export class CorralError extends Error {
  /**
   * @param {string} message
   * @param {{code?: string, status?: number, cause?: unknown}} [opts]
   */
  constructor(message, opts = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    /** @type {string} the API's error code ("not_found", ...), or the SDK's own */
    this.code = opts.code ?? "unknown";
    /** @type {number} the HTTP status, 0 when none came */
    this.status = opts.status ?? 0;
  }
}

/** The sandbox, process, file or snapshot does not exist (404). */
export class NotFoundError extends CorralError {}
/** A bad argument (400): the message names it. */
export class InvalidArgumentError extends CorralError {}
/** The runtime or sandbox cannot do this (400 not_supported). */
export class NotSupportedError extends InvalidArgumentError {}
/** The state forbids it, or the name is taken (409). */
export class ConflictError extends CorralError {}
/** A quota or the host's capacity is spent (429). */
export class ResourceExhaustedError extends CorralError {}
/** The token is missing or wrong (401/403). */
export class AuthenticationError extends CorralError {}
/** The daemon gave up waiting (504 deadline_exceeded). */
export class DeadlineExceededError extends CorralError {}
/** The daemon could not be reached, or the connection broke. */
export class ConnectionError extends CorralError {}

const byCode = {
  not_found: NotFoundError,
  invalid_argument: InvalidArgumentError,
  not_supported: NotSupportedError,
  already_exists: ConflictError,
  failed_precondition: ConflictError,
  resource_exhausted: ResourceExhaustedError,
  unauthenticated: AuthenticationError,
  permission_denied: AuthenticationError,
  deadline_exceeded: DeadlineExceededError,
};

const byStatus = {
  400: InvalidArgumentError,
  401: AuthenticationError,
  403: AuthenticationError,
  404: NotFoundError,
  409: ConflictError,
  429: ResourceExhaustedError,
  504: DeadlineExceededError,
};

/**
 * The error for an API answer: by its code, else by its status.
 * @param {number} status
 * @param {string} code
 * @param {string} message
 * @returns {CorralError}
 */
export function apiError(status, code, message) {
  const Cls = byCode[code] ?? byStatus[status] ?? CorralError;
  return new Cls(message || `HTTP ${status}`, { code: code || "unknown", status });
}
