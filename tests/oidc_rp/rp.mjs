// Locky's OpenID provider driven by panva's openid-client, the way its users run it.
//
//   RP_CONFIG='{...}' node rp.mjs SCENARIO [ARG]
//
// SCENARIO: discovery | code CLIENT | totp | errors | machine | machine-role | machine-rotated |
// before-delete | after-delete. RP_CONFIG (JSON, written by test_openid_client.py) names
// the issuer, the redirect URIs, the registered clients (client_id, client_secret,
// alg, name) and the users (email, password, uuid, name, groups; the TOTP user's
// secret); RP_STATE is a file that passes tokens from one run to the next (before and
// after the provider's admin rotated a secret or deleted a client). Each check prints
// one line: "ok NAME" or "not ok NAME - why".
import * as client from 'openid-client'
import assert from 'node:assert/strict'
import { readFileSync, writeFileSync } from 'node:fs'
import { Browser, forms, inputValue, totp } from './browser.mjs'
import { check, finish, jwtPart, oauthError, refused } from './checks.mjs'

const cfg = JSON.parse(process.env.RP_CONFIG)
const ISSUER = new URL(cfg.issuer)
const REDIRECT = cfg.redirect_uri
const POST_LOGOUT = cfg.post_logout_redirect_uri
const insecure = { execute: [client.allowInsecureRequests] }  // plain http on 127.0.0.1 only
const [scenario, arg] = process.argv.slice(2)

const saveState = (value) => writeFileSync(process.env.RP_STATE, JSON.stringify(value))
const loadState = () => JSON.parse(readFileSync(process.env.RP_STATE, 'utf8'))

/** A Configuration of registered client `label`, authenticating as `how` (basic | post | none). */
async function configure (label, { how, secret } = {}) {
  const c = cfg.clients[label]
  secret = secret ?? c.client_secret
  how = how ?? (secret ? 'basic' : 'none')
  const auth = { basic: client.ClientSecretBasic, post: client.ClientSecretPost, none: client.None }[how]
  const metadata = { id_token_signed_response_alg: c.alg ?? 'RS256' }
  if (secret) metadata.client_secret = secret
  const config = await client.discovery(ISSUER, c.client_id, metadata, auth(secret), insecure)
  // Keep what went to the token endpoint, to show which client authentication was sent.
  config.sent = []
  config[client.customFetch] = (url, options) => {
    config.sent.push({ url: String(url), headers: new Headers(options.headers), body: String(options.body ?? '') })
    return fetch(url, options)
  }
  return config
}

async function pkce () {
  const verifier = client.randomPKCECodeVerifier()
  return { verifier, challenge: await client.calculatePKCECodeChallenge(verifier) }
}

function authorizationUrl (config, { scope = 'openid', state, nonce, challenge, ...rest }) {
  const params = { redirect_uri: REDIRECT, scope, state, ...rest }
  if (nonce) params.nonce = nonce
  if (challenge) Object.assign(params, { code_challenge: challenge, code_challenge_method: 'S256' })
  return client.buildAuthorizationUrl(config, params)
}

const signInForm = (page) => forms(page.html ?? '').some((f) => f.names.has('email') && f.names.has('password'))

/** Sign in on the provider's pages (password, TOTP code, consent) until the redirect back. */
async function signIn (browser, url, user, { consent = 'allow', code } = {}) {
  let step = await browser.follow(url)
  if (step.redirectedTo) return step
  assert.ok(signInForm(step), `expected the sign-in page, got ${step.status}: ${step.html.slice(0, 300)}`)
  step = await browser.submit(step, { email: user.email, password: user.password })
  if (!step.redirectedTo && forms(step.html).some((f) => f.names.has('code'))) {
    step = await browser.submit(step, { code: await code() })
  }
  if (!step.redirectedTo && forms(step.html).some((f) => f.names.has('decision'))) {
    step = await browser.submit(step, { decision: consent })
  }
  assert.ok(step.redirectedTo, `no redirect back; page ${step.status}: ${step.html?.slice(0, 300)}`)
  return step
}

/** A new login of `config`'s client through a browser that already holds an OP session. */
async function silentLogin (browser, config, scope = 'openid email profile groups offline_access') {
  const { verifier, challenge } = await pkce()
  const state = client.randomState()
  const nonce = client.randomNonce()
  const step = await browser.follow(authorizationUrl(config, { scope, state, nonce, challenge, prompt: 'none' }).href)
  assert.ok(step.redirectedTo?.searchParams.get('code'), `prompt=none gave ${step.redirectedTo ?? step.status}`)
  return { callback: step.redirectedTo, verifier, state, nonce }
}

const exchange = (config, login) => client.authorizationCodeGrant(config, login.callback, {
  pkceCodeVerifier: login.verifier, expectedState: login.state, expectedNonce: login.nonce, idTokenExpected: true
})

/** `promise`, its failure named by `label` (a check of several calls says which one failed). */
async function step (label, promise) {
  try {
    return await promise
  } catch (error) {
    error.message = `${label}: ${error.message} (${oauthError(error) ?? error.status ?? ''})`
    throw error
  }
}

const userinfoRefused = (config, token, sub) => refused(client.fetchUserInfo(config, token, sub))

// -- scenarios ---------------------------------------------------------------------------

async function discovery () {
  const config = await check('discovery: openid-client reads the document', () => configure('basic'))
  const meta = config?.serverMetadata() ?? {}
  await check('discovery: issuer is the URL it was fetched from', () => assert.equal(meta.issuer, cfg.issuer))
  await check('discovery: endpoints', () => {
    for (const name of ['authorization_endpoint', 'token_endpoint', 'userinfo_endpoint', 'jwks_uri',
      'end_session_endpoint', 'revocation_endpoint', 'introspection_endpoint']) {
      assert.ok(meta[name]?.startsWith(cfg.issuer), `${name}: ${meta[name]}`)
    }
  })
  await check('discovery: code flow with S256 only', () => {
    assert.deepEqual(meta.response_types_supported, ['code'])
    assert.deepEqual(meta.code_challenge_methods_supported, ['S256'])
    assert.deepEqual(meta.subject_types_supported, ['public'])
  })
  await check('discovery: grants, client authentication, algorithms', () => {
    for (const g of ['authorization_code', 'refresh_token', 'client_credentials']) assert.ok(meta.grant_types_supported.includes(g), g)
    for (const m of ['client_secret_basic', 'client_secret_post', 'none']) assert.ok(meta.token_endpoint_auth_methods_supported.includes(m), m)
    for (const a of ['RS256', 'ES256']) assert.ok(meta.id_token_signing_alg_values_supported.includes(a), a)
    for (const s of ['openid', 'profile', 'email', 'groups', 'offline_access']) assert.ok(meta.scopes_supported.includes(s), s)
  })
  await check('discovery: the JWKS holds RS256 and ES256 keys', async () => {
    const jwks = await (await fetch(meta.jwks_uri)).json()
    const algs = jwks.keys.map((k) => k.alg ?? (k.kty === 'RSA' ? 'RS256' : k.crv === 'P-256' ? 'ES256' : k.kty))
    assert.ok(algs.includes('RS256') && algs.includes('ES256'), algs.join(','))
  })
}

async function codeFlow (label) {
  const c = cfg.clients[label]
  const user = cfg.user
  const how = label === 'post' ? 'post' : c.client_secret ? 'basic' : 'none'
  const p = `${label} (${how}, ${c.alg ?? 'RS256'})`
  const config = await configure(label, { how })
  const browser = new Browser(cfg.issuer)

  await check(`${p}: prompt=none without a session -> login_required`, async () => {
    const state = client.randomState()
    const { challenge } = await pkce()
    const step = await browser.follow(authorizationUrl(config, { state, challenge, prompt: 'none' }).href)
    assert.equal(step.redirectedTo?.searchParams.get('error'), 'login_required')
    assert.equal(step.redirectedTo.searchParams.get('state'), state)
    await refused(client.authorizationCodeGrant(config, step.redirectedTo, { expectedState: state }), 'login_required')
  })

  const { verifier, challenge } = await pkce()
  const state = client.randomState()
  const nonce = client.randomNonce()
  const scope = 'openid email profile groups offline_access'
  const url = authorizationUrl(config, { scope, state, nonce, challenge, login_hint: user.email })
  let page = await check(`${p}: the sign-in page, email pre-filled from login_hint`, async () => {
    const step = await browser.follow(url.href)
    assert.equal(step.status, 200, step.html?.slice(0, 300))
    assert.ok(signInForm(step), 'no email + password form')
    assert.equal(inputValue(step.html, 'email'), user.email)
    assert.match(step.headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/)
    return step
  })
  await check(`${p}: a wrong password stays on the sign-in page with 401`, async () => {
    const step = await browser.submit(page, { email: user.email, password: user.password + '-wrong' })
    assert.equal(step.status, 401)
    assert.ok(signInForm(step))
    page = step
  })
  let step = await check(`${p}: sign in with email and password`, async () => {
    const next = await browser.submit(page, { email: user.email, password: user.password })
    assert.ok(next.redirectedTo || next.status === 200, `status ${next.status}`)
    return next
  })
  if (c.first_party) {
    await check(`${p}: a first-party client asks no consent`, () => assert.ok(step?.redirectedTo, 'a page was shown'))
  } else {
    step = await check(`${p}: the consent page names the client, Allow -> back to the client`, async () => {
      assert.ok(!step.redirectedTo, 'no consent page')
      assert.ok(step.html.includes(c.name), `client name ${c.name} not on the page`)
      assert.ok(forms(step.html).some((f) => f.names.has('decision')))
      const next = await browser.submit(step, { decision: 'allow' })
      assert.ok(next.redirectedTo, `status ${next.status}`)
      return next
    })
  }
  const tokens = await check(`${p}: code + PKCE exchanged, ID token valid (iss, aud, nonce, signature)`, async () => {
    assert.ok(step.redirectedTo.href.startsWith(REDIRECT))
    return await client.authorizationCodeGrant(config, step.redirectedTo,
      { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce, idTokenExpected: true })
  })
  await check(`${p}: the token request authenticated with ${how}`, () => {
    const sent = config.sent.find((r) => r.url === config.serverMetadata().token_endpoint)
    assert.ok(sent, 'no token request seen')
    const basic = (sent.headers.get('authorization') ?? '').startsWith('Basic ')
    const posted = new URLSearchParams(sent.body)
    assert.equal(basic, how === 'basic')
    assert.equal(posted.has('client_secret'), how === 'post')
    if (how === 'none') assert.equal(posted.get('client_id'), c.client_id)
  })
  const claims = tokens?.claims()
  await check(`${p}: ID token claims`, () => {
    assert.equal(jwtPart(tokens.id_token, 0).alg, c.alg ?? 'RS256')
    assert.equal(claims.iss, cfg.issuer)
    assert.equal(claims.sub, user.uuid)
    assert.deepEqual([claims.aud].flat(), [c.client_id])
    assert.equal(claims.nonce, nonce)
    assert.equal(typeof claims.auth_time, 'number')
    assert.ok(claims.amr?.includes('pwd'), `amr ${claims.amr}`)
    assert.equal(claims.email, user.email)
    assert.equal(claims.email_verified, true)
    assert.equal(claims.name, user.name)
    assert.deepEqual([...claims.groups].sort(), [...user.groups].sort())
  })
  await check(`${p}: token answer (Bearer, scope, refresh token for offline_access)`, () => {
    assert.equal(tokens.token_type.toLowerCase(), 'bearer')
    assert.deepEqual(tokens.scope.split(' ').sort(), scope.split(' ').sort())
    assert.ok(tokens.refresh_token)
    assert.ok(tokens.expires_in > 0)
  })
  await check(`${p}: the access token is a Locky token for this client`, () => {
    const at = jwtPart(tokens.access_token)
    assert.equal(at.aud, c.client_id)
    assert.equal(at.client_id, c.client_id)
    assert.equal(at.sub, user.uuid)
    assert.equal(at.typ, 'access')
    assert.deepEqual(at.scope.split(' ').sort(), scope.split(' ').sort())
  })
  await check(`${p}: userinfo`, async () => {
    const info = await client.fetchUserInfo(config, tokens.access_token, claims.sub)
    assert.equal(info.email, user.email)
    assert.equal(info.name, user.name)
    assert.deepEqual([...info.groups].sort(), [...user.groups].sort())
  })
  await check(`${p}: userinfo scoped to the grant (openid only: no email, no name)`, async () => {
    const login = await silentLogin(browser, config, 'openid')
    const narrow = await exchange(config, login)
    const info = await client.fetchUserInfo(config, narrow.access_token, claims.sub)
    assert.equal(info.sub, claims.sub)
    assert.equal(info.email, undefined)
    assert.equal(info.name, undefined)
    assert.equal(narrow.refresh_token, undefined, 'a refresh token without offline_access')
  })
  if (c.client_secret) {
    await check(`${p}: introspection of its access token`, async () => {
      const answer = await client.tokenIntrospection(config, tokens.access_token)
      assert.equal(answer.active, true)
      assert.equal(answer.client_id, c.client_id)
      assert.equal(answer.sub, user.uuid)
    })
  }

  const refreshed = await check(`${p}: refresh rotates the refresh token`, async () => {
    const next = await client.refreshTokenGrant(config, tokens.refresh_token)
    assert.ok(next.refresh_token && next.refresh_token !== tokens.refresh_token)
    await client.fetchUserInfo(config, next.access_token, claims.sub)
    return next
  })
  await check(`${p}: a refresh token used twice -> invalid_grant`, () =>
    refused(client.refreshTokenGrant(config, tokens.refresh_token), 'invalid_grant'))
  await check(`${p}: after reuse the whole chain is dead`, async () => {
    await refused(client.refreshTokenGrant(config, refreshed.refresh_token), 'invalid_grant')
    await userinfoRefused(config, refreshed.access_token, claims.sub)
  })

  await check(`${p}: prompt=none with a session -> a code at once`, async () => {
    const login = await silentLogin(browser, config)
    await exchange(config, login)
  })
  await check(`${p}: max_age=0 asks for the password again`, async () => {
    const { challenge } = await pkce()
    const again = await browser.follow(authorizationUrl(config, { state: 's', challenge, max_age: '0' }).href)
    assert.ok(!again.redirectedTo && signInForm(again), `got ${again.redirectedTo ?? again.status}`)
  })
  if (cfg.clients.other && !c.first_party) {
    await check(`${p}: prompt=none, signed in, another client never consented -> consent_required`, async () => {
      const other = await configure('other')
      const st = client.randomState()
      const { challenge } = await pkce()
      const to = await browser.follow(authorizationUrl(other, { state: st, challenge, prompt: 'none' }).href)
      assert.equal(to.redirectedTo?.searchParams.get('error'), 'consent_required')
      assert.equal(to.redirectedTo.searchParams.get('state'), st)
    })
    await check(`${p}: a scope the client may not ask for -> invalid_scope, redirected with state`, async () => {
      const other = await configure('other')
      const { challenge } = await pkce()
      const to = await browser.follow(authorizationUrl(other, { scope: 'openid groups', state: 'sc', challenge }).href)
      assert.equal(to.redirectedTo?.searchParams.get('error'), 'invalid_scope')
      assert.equal(to.redirectedTo.searchParams.get('state'), 'sc')
    })
  }

  await check(`${p}: wrong PKCE verifier -> invalid_grant`, async () => {
    const login = await silentLogin(browser, config)
    await refused(client.authorizationCodeGrant(config, login.callback,
      { pkceCodeVerifier: client.randomPKCECodeVerifier(), expectedState: login.state, expectedNonce: login.nonce }),
    'invalid_grant')
  })
  await check(`${p}: a code used twice -> invalid_grant, and the first exchange's tokens are revoked`, async () => {
    const login = await silentLogin(browser, config)
    const first = await exchange(config, login)
    await refused(exchange(config, login), 'invalid_grant')
    await userinfoRefused(config, first.access_token, claims.sub)
    await refused(client.refreshTokenGrant(config, first.refresh_token), 'invalid_grant')
  })

  const last = await check(`${p}: a last login before logout`, async () => exchange(config, await silentLogin(browser, config)))
  const registered = Boolean(c.post_logout)
  await check(registered
    ? `${p}: end-session with state -> back to the registered post-logout URI with state`
    : `${p}: end-session without a registered post-logout URI -> the signed-out page`, async () => {
    const params = { id_token_hint: last.id_token, state: 'bye-1' }
    if (registered) params.post_logout_redirect_uri = POST_LOGOUT
    const out = await browser.follow(client.buildEndSessionUrl(config, params).href)
    if (registered) {
      assert.ok(out.redirectedTo?.href.startsWith(POST_LOGOUT), `went to ${out.redirectedTo ?? out.status}`)
      assert.equal(out.redirectedTo.searchParams.get('state'), 'bye-1')
    } else {
      assert.equal(out.status, 200)
      assert.match(out.headers.get('content-type') ?? '', /text\/html/)
    }
  })
  await check(`${p}: after logout prompt=none -> login_required`, async () => {
    const { challenge } = await pkce()
    const to = await browser.follow(authorizationUrl(config, { state: 'after', challenge, prompt: 'none' }).href)
    assert.equal(to.redirectedTo?.searchParams.get('error'), 'login_required')
  })
  await check(`${p}: after logout the session's tokens are refused`, async () => {
    await userinfoRefused(config, last.access_token, claims.sub)
    await refused(client.refreshTokenGrant(config, last.refresh_token), 'invalid_grant')
  })
}

async function totpFlow () {
  const user = cfg.totp_user
  const config = await configure('post', { how: 'post' })
  const browser = new Browser(cfg.issuer)
  const { verifier, challenge } = await pkce()
  const state = client.randomState()
  const nonce = client.randomNonce()
  const url = authorizationUrl(config, { scope: 'openid email', state, nonce, challenge })
  let page = await check('totp: the password leads to the code step', async () => {
    const start = await browser.follow(url.href)
    const next = await browser.submit(start, { email: user.email, password: user.password })
    assert.ok(!next.redirectedTo, 'signed in without a code')
    assert.ok(forms(next.html).some((f) => f.names.has('code')), next.html.slice(0, 300))
    return next
  })
  await check('totp: a wrong code stays on the code step with 401', async () => {
    const next = await browser.submit(page, { code: '000000' === await totp(user.secret) ? '111111' : '000000' })
    assert.equal(next.status, 401)
    assert.ok(forms(next.html).some((f) => f.names.has('code')))
    page = next
  })
  const back = await check('totp: the right code -> back to the client', async () => {
    // The next step's code: the current step's was spent when TOTP was confirmed.
    const next = await browser.submit(page, { code: await totp(user.secret, Date.now() / 1000 + 30) })
    assert.ok(next.redirectedTo, `status ${next.status}: ${next.html?.slice(0, 300)}`)
    return next
  })
  await check('totp: ID token amr has pwd and otp', async () => {
    const tokens = await client.authorizationCodeGrant(config, back.redirectedTo,
      { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce, idTokenExpected: true })
    const amr = tokens.claims().amr ?? []
    assert.ok(amr.includes('pwd') && amr.includes('otp'), `amr ${amr}`)
    assert.equal(tokens.claims().email, user.email)
  })
}

async function errors () {
  const pub = await configure('public')
  const basic = await configure('basic')
  const browser = new Browser(cfg.issuer)
  const noRedirect = async (url) => {
    const res = await fetch(url, { redirect: 'manual' })
    assert.equal(res.status, 400)
    assert.equal(res.headers.get('location'), null)
    assert.match(res.headers.get('content-type') ?? '', /text\/html/)
  }
  await check('errors: unregistered redirect URI -> 400 page, no redirect', async () => {
    const { challenge } = await pkce()
    await noRedirect(client.buildAuthorizationUrl(basic, { redirect_uri: REDIRECT + '/elsewhere', scope: 'openid',
      state: 's', code_challenge: challenge, code_challenge_method: 'S256' }))
  })
  await check('errors: unknown client -> 400 page, no redirect', async () => {
    const u = client.buildAuthorizationUrl(basic, { redirect_uri: REDIRECT, scope: 'openid', state: 's' })
    u.searchParams.set('client_id', 'no-such-client')
    await noRedirect(u)
  })
  await check('errors: public client without PKCE -> invalid_request, redirected with state', async () => {
    const step = await browser.follow(client.buildAuthorizationUrl(pub, { redirect_uri: REDIRECT, scope: 'openid', state: 'np' }).href)
    assert.equal(step.redirectedTo?.searchParams.get('error'), 'invalid_request')
    assert.equal(step.redirectedTo.searchParams.get('state'), 'np')
    await refused(client.authorizationCodeGrant(pub, step.redirectedTo, { expectedState: 'np' }), 'invalid_request')
  })
  await check('errors: code_challenge_method=plain -> invalid_request', async () => {
    const step = await browser.follow(client.buildAuthorizationUrl(pub, { redirect_uri: REDIRECT, scope: 'openid',
      state: 'pl', code_challenge: client.randomPKCECodeVerifier(), code_challenge_method: 'plain' }).href)
    assert.equal(step.redirectedTo?.searchParams.get('error'), 'invalid_request')
  })
  await check('errors: the sign-in form without its CSRF token is refused', async () => {
    const { challenge } = await pkce()
    const page = await browser.follow(client.buildAuthorizationUrl(basic, { redirect_uri: REDIRECT, scope: 'openid',
      state: 'c', code_challenge: challenge, code_challenge_method: 'S256' }).href)
    const form = forms(page.html).find((f) => f.names.has('password'))
    const hidden = Object.fromEntries(Object.entries(form.hidden).filter(([name]) => !/csrf/i.test(name)))
    assert.ok(Object.keys(hidden).length < Object.keys(form.hidden).length, 'no hidden CSRF field on the form')
    const res = await browser.fetch(new URL(form.action || page.url, page.url).href, {
      method: 'POST',
      body: new URLSearchParams({ ...hidden, email: cfg.user.email, password: cfg.user.password }),
      headers: { 'content-type': 'application/x-www-form-urlencoded' }
    })
    assert.ok(res.status === 400 || res.status === 403, `status ${res.status}`)
    assert.equal(res.headers.get('location'), null)
  })
  await check('errors: an unknown grant type -> unsupported_grant_type', () =>
    refused(client.genericGrantRequest(basic, 'urn:example:nothing', {}), 'unsupported_grant_type'))
  await check('errors: a public client cannot use client_credentials', () =>
    refused(client.clientCredentialsGrant(pub)))
  await check('errors: userinfo with a bad token -> 401 Bearer invalid_token', async () => {
    const res = await fetch(basic.serverMetadata().userinfo_endpoint, { headers: { authorization: 'Bearer not-a-token' } })
    assert.equal(res.status, 401)
    assert.match(res.headers.get('www-authenticate') ?? '', /Bearer.*invalid_token/)
  })
}

/** A client_credentials token's use on Locky's own API: authz checks yes, user lists no. */
async function asMachine (config, token) {
  const base = cfg.issuer
  // A 401 with a Bearer challenge is thrown (WWWAuthenticateChallengeError): its status is the answer.
  const call = (url) => client.fetchProtectedResource(config, token, new URL(url), 'GET')
    .catch((error) => { if (error.response ?? error.status) return error.response ?? { status: error.status }; throw error })
  const check = await call(`${base}/v1/internal/authz/check?user_uuid=${cfg.user.uuid}&resource=reports&action=read`)
  const list = await call(`${base}/v1/internal/users`)
  return { check: check.status, answer: check.status === 200 ? await check.json() : null, list: list.status }
}

async function machine () {
  const c = cfg.clients.machine
  for (const how of ['basic', 'post']) {
    const config = await configure('machine', { how })
    const token = await check(`machine (${how}): client_credentials grant`, async () => {
      const t = await client.clientCredentialsGrant(config)
      assert.equal(t.token_type.toLowerCase(), 'bearer')
      assert.equal(t.refresh_token, undefined)
      assert.equal(t.id_token, undefined)
      return t
    })
    await check(`machine (${how}): the token's subject is the client`, () => {
      const at = jwtPart(token.access_token)
      assert.equal(at.sub, c.client_id)
      assert.equal(at.client_id, c.client_id)
      assert.match(at.sid, /^client:/)
    })
    await check(`machine (${how}): may ask /v1/internal/authz/check, may not list users`, async () => {
      const seen = await asMachine(config, token.access_token)
      assert.equal(seen.check, 200)
      assert.deepEqual(seen.answer, { allowed: false })
      assert.equal(seen.list, 403)
    })
    await check(`machine (${how}): introspection`, async () => {
      const answer = await client.tokenIntrospection(config, token.access_token)
      assert.equal(answer.active, true)
      assert.equal(answer.client_id, c.client_id)
    })
    if (how === 'basic') saveState({ machine_token: token?.access_token })
  }
  await check('machine: a wrong secret -> invalid_client (401)', async () => {
    const bad = await configure('machine', { how: 'post', secret: 'not-the-secret' })
    const error = await refused(client.clientCredentialsGrant(bad), 'invalid_client')
    assert.equal(error.status ?? error.response?.status, 401)
  })
}

async function machineRole () {
  const config = await configure('machine')
  await check('machine: given a role (locky grant-role client:ID ROLE), it may do what the role allows', async () => {
    const token = await client.clientCredentialsGrant(config)
    const seen = await asMachine(config, token.access_token)
    assert.equal(seen.list, 200)
    assert.equal(seen.check, 200)
  })
}

async function machineRotated () {
  const { machine_token: before } = loadState()
  await check('rotated secret: the old secret -> invalid_client', async () => {
    for (const how of ['basic', 'post']) {
      await refused(client.clientCredentialsGrant(await configure('machine', { how })), 'invalid_client')
    }
  })
  const fresh = await configure('machine', { secret: arg })
  const token = await check('rotated secret: the new secret works', () => client.clientCredentialsGrant(fresh))
  await check('rotated secret: a token from before the rotation still works', async () => {
    assert.equal((await asMachine(fresh, before)).check, 200)
  })
  await check('machine: revoking a client_credentials token ends the client\'s tokens', async () => {
    await step('revocation', client.tokenRevocation(fresh, token.access_token))
    assert.equal((await step('introspection', client.tokenIntrospection(fresh, token.access_token))).active, false)
    assert.equal((await asMachine(fresh, before)).check, 401)
    await step('a new grant', client.clientCredentialsGrant(fresh))  // and the client gets new ones
  })
}

async function beforeDelete () {
  const config = await configure('doomed', { how: 'post' })
  const browser = new Browser(cfg.issuer)
  const { verifier, challenge } = await pkce()
  const state = client.randomState()
  const step = await signIn(browser, authorizationUrl(config, { scope: 'openid email offline_access', state, challenge }).href, cfg.user)
  const tokens = await check('deleted client: a login before the deletion', () =>
    client.authorizationCodeGrant(config, step.redirectedTo, { pkceCodeVerifier: verifier, expectedState: state }))
  const machineToken = await check('deleted client: a client_credentials token before the deletion', () =>
    client.clientCredentialsGrant(config))
  saveState({ access_token: tokens?.access_token, refresh_token: tokens?.refresh_token, machine_token: machineToken?.access_token })
}

async function afterDelete () {
  const state = loadState()
  const config = await configure('doomed', { how: 'post' })
  await check('deleted client: its secret -> invalid_client', () => refused(client.clientCredentialsGrant(config), 'invalid_client'))
  await check('deleted client: its refresh token is refused', () => refused(client.refreshTokenGrant(config, state.refresh_token)))
  await check('deleted client: its users\' access tokens are refused', () =>
    userinfoRefused(config, state.access_token, client.skipSubjectCheck))
  await check('deleted client: its client_credentials token is refused', async () => {
    const res = await fetch(`${cfg.issuer}/v1/internal/authz/check?user_uuid=${cfg.user.uuid}&resource=r&action=a`,
      { headers: { authorization: `Bearer ${state.machine_token}` } })
    assert.equal(res.status, 401)
  })
  await check('deleted client: authorization -> 400 page, no redirect', async () => {
    const { challenge } = await pkce()
    const res = await fetch(authorizationUrl(config, { state: 's', challenge }), { redirect: 'manual' })
    assert.equal(res.status, 400)
    assert.equal(res.headers.get('location'), null)
  })
}

const scenarios = {
  discovery, code: () => codeFlow(arg), totp: totpFlow, errors, machine,
  'machine-role': machineRole, 'machine-rotated': machineRotated, 'before-delete': beforeDelete, 'after-delete': afterDelete
}
if (!scenarios[scenario]) {
  console.error(`unknown scenario ${scenario}; one of ${Object.keys(scenarios).join(', ')}`)
  process.exit(2)
}
try {
  await scenarios[scenario]()
} catch (error) {
  // A failure outside any check (e.g. discovery refused): one failed line, not a stack.
  await check(`${scenario}: setup`, () => { throw error })
}
finish()

