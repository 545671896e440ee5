// Named checks, one line each on stdout ("ok NAME" / "not ok NAME - why"), read by
// tests/oidc_rp/test_openid_client.py; the exit status is 1 when any check failed.
import { inspect } from 'node:util'

let failed = 0

/** Run `fn`, print its outcome under `name`; its value, or undefined when it threw. */
export async function check (name, fn) {
  try {
    const value = await fn()
    console.log(`ok ${name}`)
    return value
  } catch (error) {
    failed += 1
    const why = error instanceof Error ? `${error.constructor.name}: ${error.message}` : inspect(error)
    console.log(`not ok ${name} - ${why.replaceAll('\n', ' ')}`)
    if (process.env.RP_DEBUG) console.error(error)
    return undefined
  }
}

export function finish () {
  process.exitCode = failed ? 1 : 0
}

/** The OAuth error code of an openid-client failure: a JSON error body or a 401's WWW-Authenticate. */
export function oauthError (error) {
  return error?.error ?? error?.cause?.[0]?.parameters?.error ?? error?.cause?.error
}

/** Expect `promise` to fail with OAuth error `code`; returns the error. */
export async function refused (promise, code) {
  try {
    await promise
  } catch (error) {
    if (code && oauthError(error) !== code) {
      throw new Error(`expected ${code}, got ${oauthError(error) ?? error.constructor.name}: ${error.message}`)
    }
    return error
  }
  throw new Error(`expected ${code ?? 'a refusal'}, but it succeeded`)
}

/** The payload of a JWT, unverified (to read what the provider put in it). */
export function jwtPart (token, index = 1) {
  return JSON.parse(Buffer.from(token.split('.')[index], 'base64url').toString())
}
