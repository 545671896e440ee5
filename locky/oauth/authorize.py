"""The authorization endpoint and its pages (docs/http/oauth.md): ``GET|POST
/oauth/authorize`` and the posts of its sign-in, second-factor and consent forms.

The sign-in page has a second form, "Sign in with a passkey" (docs/http/accounts.md#passkeys), shown by
its script when the browser has WebAuthn: it posts the authenticator's answer and goes
on exactly as the password form does.

The pages keep no state of their own: each form carries the authorization request's
parameters (one hidden field, ``request``) and a CSRF token, and each post re-validates
that request through Authlib before anything else, so a client deleted or a redirect
URI unregistered meanwhile is refused as on the first visit. Until the client and its
redirect URI are verified an error is a page with status 400, never a redirect; after
that every error is a redirect to the client with ``error``, ``error_description`` and
``state``.

Signing in goes through :class:`locky.accounts.logins.Accounts`, the path of
``POST /v1/public/users/login`` and ``POST /v1/public/users/login/passkey``: the same
counts, lockout, refusals (answered as the page again, with the API's words and status)
and events, which here name the client.
"""

from __future__ import annotations

import json
import time
from urllib.parse import parse_qsl, urlsplit

from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import InvalidRequestError
from authlib.oidc.core.errors import ConsentRequiredError, LoginRequiredError

from locky import events
from locky.accounts.logins import BAD_CODE, Accounts, PageSignIn
from locky.errors import Forbidden, Invalid, LockyError, Locked, Unauthorized
from locky.oauth import pages
from locky.oauth.browser import CSRF_FIELD, OpSession, browser
from locky.oauth.server import EndUser, OAuthRequest, oauth_server, read_form, respond

#: The most parameters an authorization request (and so the hidden field) may carry.
MAX_PARAMETERS = 100
FORGED = "This form has expired or did not come from this page: go back to the application and sign in again."
MISSING_CREDENTIALS = "Enter your email and your password."
MISSING_CODE = "Enter a code."
MISSING_PASSKEY = "The passkey's answer did not arrive: press “Sign in with a passkey” again, or use your password."


class Authorize:
    """``/oauth/authorize`` (GET and POST: OpenID Connect allows both) and its form posts
    (``suffix`` ``login``, ``passkey``, ``code``, ``consent``)."""

    def __init__(self, context, accounts: Accounts | None = None):
        self.context = context
        self._accounts = accounts

    @property
    def accounts(self) -> Accounts:
        if self._accounts is None:  # built on first use: it hashes a dummy password
            self._accounts = Accounts(self.context)
        return self._accounts

    @property
    def server(self):
        return oauth_server(self.context)

    @property
    def browser(self):
        return browser(self.context)

    # -- the authorization request ---------------------------------------------------------

    def on_get(self, req, resp):
        oreq = self.server.create_oauth2_request(req)
        self._authorize(req, resp, oreq)

    on_post = on_get

    def _authorize(self, req, resp, oreq: OAuthRequest, *, op: OpSession | None = None, signed_in: bool = False,
                   consented: bool = False, fresh_mark: str | None = None) -> None:
        """Answer the validated request ``oreq``: the sign-in page, the consent page, an
        error redirect, or the code. ``signed_in``: the browser signed in during this very
        request (``prompt=login`` and ``max_age`` are met); ``consented``: the user has
        just allowed it (the consent page is not shown again). ``op``: the OP session
        this request made or read already, else the cookie's."""
        if op is None:
            op = self.browser.current(req)
        grant = self._grant(resp, oreq, op)
        if grant is None:
            return
        data = oreq.payload.data
        prompts = (data.get("prompt") or "").split()
        max_age = data.get("max_age")
        if max_age is not None and not (max_age.isascii() and max_age.isdigit()):
            return self._redirect_error(resp, oreq, InvalidRequestError(
                "'max_age' must be a non-negative integer.", redirect_uri=grant.redirect_uri))
        fresh = signed_in or (op is not None and self.browser.is_fresh(fresh_mark, op.session.uuid))
        if op is None or (not fresh and ("login" in prompts or _too_old(op, max_age))):
            if "none" in prompts:
                return self._redirect_error(resp, oreq, LoginRequiredError(redirect_uri=grant.redirect_uri))
            return self._signin_page(req, resp, oreq, grant, email=data.get("login_hint") or "")
        client = grant.client.record
        scopes = (grant.request.scope or "").split()
        if not consented and not client.first_party and ("consent" in prompts or not self._covered(op, client, scopes)):
            if "none" in prompts:
                return self._redirect_error(resp, oreq, ConsentRequiredError(redirect_uri=grant.redirect_uri))
            return pages.consent(resp, client_name=client.name, email=op.user.email, scopes=scopes,
                                 request=pages.carried(_params(oreq)), csrf_token=self.browser.csrf_token(req, resp),
                                 fresh=self.browser.fresh_mark(op.session.uuid) if fresh else "",
                                 redirect_uri=grant.redirect_uri)
        self._issue(resp, oreq, grant, op)

    def _grant(self, resp, oreq: OAuthRequest, op: OpSession | None):
        """The validated grant of ``oreq``, or ``None`` once the error is answered."""
        try:
            return self.server.get_consent_grant(oreq, end_user=_end_user(op))
        except OAuth2Error as exc:
            if exc.redirect_uri:  # the client and its redirect URI were verified
                self._redirect_error(resp, oreq, exc)
            else:
                pages.error(resp, _description(exc))
            return None

    def _redirect_error(self, resp, oreq: OAuthRequest, exc: OAuth2Error) -> None:
        exc.state = oreq.payload.state
        respond(resp, self.server.handle_error_response(oreq, exc))
        pages.page_headers(resp)

    def _covered(self, op: OpSession, client, scopes: list[str]) -> bool:
        """Whether the user's stored consent to ``client`` holds every asked scope."""
        consent = self.context.storage.consents.get(op.user.uuid, client.client_id)
        return consent is not None and set(scopes) <= set(consent.scopes)

    def _issue(self, resp, oreq: OAuthRequest, grant, op: OpSession) -> None:
        """The code, redirected to the client, with its ``oauth.authorized`` event in the
        transaction that stores the code."""
        client = grant.client.record
        storage = self.context.storage
        with storage.atomic():
            result = self.server.create_authorization_response(oreq, grant_user=_end_user(op), grant=grant)
            if _has_code(result):
                self.context.audit.record(
                    events.OAUTH_AUTHORIZED, target_type="user", target_uuid=op.user.uuid, actor_uuid=op.user.uuid,
                    details={"client_id": client.client_id, "scope": grant.request.scope or "",
                             "op_session_uuid": op.session.uuid})
        respond(resp, result)
        pages.page_headers(resp)

    def _signin_page(self, req, resp, oreq: OAuthRequest, grant, *, status: int = 200, email: str = "",
                     error: str | None = None, headers: dict[str, str] | None = None,
                     fields_at_fault: bool = True) -> None:
        pages.signin(resp, status=status, client_name=grant.client.record.name, request=pages.carried(_params(oreq)),
                     csrf_token=self.browser.csrf_token(req, resp), email=email, error=error,
                     redirect_uri=grant.redirect_uri, headers=headers, fields_at_fault=fields_at_fault)

    # -- the forms' posts ------------------------------------------------------------------

    def _posted(self, req, resp):
        """The posted form and its authorization request, re-validated, or ``None`` when
        the answer is already given (a forged or stale form, an invalid request)."""
        form = dict(reversed(read_form(req, self.context.settings.max_body_bytes)))
        try:
            params = parse_qsl(form.get("request", ""), keep_blank_values=True, max_num_fields=MAX_PARAMETERS)
        except ValueError:
            params = []
        oreq = OAuthRequest.from_params(self.server.base, params)
        if not self.browser.csrf_ok(req, form.get(CSRF_FIELD)):
            pages.error(resp, FORGED, heading="This form cannot be used")
            return None
        op = self.browser.current(req)
        grant = self._grant(resp, oreq, op)
        if grant is None:
            return None
        return form, oreq, grant, op

    def on_post_login(self, req, resp):
        posted = self._posted(req, resp)
        if posted is None:
            return
        form, oreq, grant, _ = posted
        email, password = form.get("email", ""), form.get("password", "")
        if not email or not password:
            return self._signin_page(req, resp, oreq, grant, status=400, email=email, error=MISSING_CREDENTIALS)
        page = PageSignIn(grant.client.record.client_id, self.browser.cookie_session_uuid(req))
        try:
            result = self.accounts.sign_in(email, password, req.context.client_address, page=page)
        except LockyError as exc:
            status, message, headers = _refusal(exc)
            return self._signin_page(req, resp, oreq, grant, status=status, email=email, error=message,
                                     headers=headers)
        self._first_factor_done(req, resp, oreq, grant, result)

    def on_post_passkey(self, req, resp):
        """The sign-in page's passkey form: its script put the browser's answer to
        ``POST /v1/public/users/login/passkey/options`` (``PublicKeyCredential.toJSON()``)
        in ``credential``; the rest is the password form's way."""
        posted = self._posted(req, resp)
        if posted is None:
            return
        form, oreq, grant, _ = posted
        try:
            credential = json.loads(form.get("credential") or "null")
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
            credential = None
        if not isinstance(credential, dict):
            return self._signin_page(req, resp, oreq, grant, status=400, error=MISSING_PASSKEY, fields_at_fault=False)
        page = PageSignIn(grant.client.record.client_id, self.browser.cookie_session_uuid(req))
        try:
            result = self.accounts.sign_in_with_passkey(credential, req.context.client_address, page=page)
        except LockyError as exc:
            status, message, headers = _refusal(exc)
            return self._signin_page(req, resp, oreq, grant, status=status, error=message, headers=headers,
                                     fields_at_fault=False)
        self._first_factor_done(req, resp, oreq, grant, result)

    def _first_factor_done(self, req, resp, oreq: OAuthRequest, grant, result: dict) -> None:
        """A password or passkey was accepted: the second step's page when the account
        asks for one, else signed in."""
        if result.get("mfa_required"):
            return pages.code(resp, client_name=grant.client.record.name, request=pages.carried(_params(oreq)),
                              csrf_token=self.browser.csrf_token(req, resp), mfa_token=result["mfa_token"],
                              redirect_uri=grant.redirect_uri)
        self._signed_in(req, resp, oreq, result)

    def on_post_code(self, req, resp):
        posted = self._posted(req, resp)
        if posted is None:
            return
        form, oreq, grant, _ = posted
        mfa_token, code = form.get("mfa_token", ""), form.get("code", "").strip()

        def again(status: int, message: str, headers: dict[str, str] | None = None) -> None:
            pages.code(resp, status=status, client_name=grant.client.record.name,
                       request=pages.carried(_params(oreq)), csrf_token=self.browser.csrf_token(req, resp),
                       mfa_token=mfa_token, error=message, redirect_uri=grant.redirect_uri, headers=headers)

        if not code:
            return again(400, MISSING_CODE)
        page = PageSignIn(grant.client.record.client_id, self.browser.cookie_session_uuid(req))
        try:
            result = self.accounts.login_mfa(mfa_token, code, req.context.client_address, page=page)
        except Unauthorized as exc:
            if exc.description == BAD_CODE:
                return again(401, exc.description)
            # The pending login is spent, expired or forged: sign in again.
            return self._signin_page(req, resp, oreq, grant, status=401, error=exc.description)
        except LockyError as exc:
            status, message, headers = _refusal(exc)
            return again(status, message, headers)
        self._signed_in(req, resp, oreq, result)

    def _signed_in(self, req, resp, oreq: OAuthRequest, result: dict) -> None:
        """A sign-in succeeded: the browser holds its OP session from now on, and the
        request goes on (consent, or the code) as that session."""
        self.browser.set_session(resp, result["session_uuid"])
        self._authorize(req, resp, oreq, op=self.browser.session(result["session_uuid"]), signed_in=True)

    def on_post_consent(self, req, resp):
        posted = self._posted(req, resp)
        if posted is None:
            return
        form, oreq, grant, op = posted
        if op is None:  # signed out meanwhile (another tab, a password change)
            return self._signin_page(req, resp, oreq, grant)
        decision = form.get("decision")
        if decision != "allow":
            # Authlib answers a grant without a user as the user's refusal: access_denied.
            respond(resp, self.server.create_authorization_response(oreq, grant_user=None, grant=grant))
            pages.page_headers(resp)
            return
        client = grant.client.record
        scopes = (grant.request.scope or "").split()
        storage = self.context.storage
        with storage.atomic():
            consent = storage.consents.grant(op.user.uuid, client.client_id, scopes)
            self.context.audit.record(events.OAUTH_CONSENT_GRANTED, target_type="user", target_uuid=op.user.uuid,
                                      actor_uuid=op.user.uuid, record=consent,
                                      details={"client_id": client.client_id, "scopes": list(consent.scopes)})
        self._authorize(req, resp, oreq, op=op, consented=True, fresh_mark=form.get("fresh"))


# -- helpers -------------------------------------------------------------------------------


def _end_user(op: OpSession | None) -> EndUser | None:
    return EndUser(op.user, op.session) if op is not None else None


def _params(oreq: OAuthRequest) -> list[tuple[str, str]]:
    """The request's parameters as it came (first value of each: a repeated one was
    refused before any page is shown)."""
    return list(oreq.payload.data.items())


def _too_old(op: OpSession, max_age: str | None) -> bool:
    return max_age is not None and time.time() - op.auth_time > int(max_age)


def _description(exc: OAuth2Error) -> str:
    """Words for a refused request that is not sent back to the client."""
    if exc.error == "invalid_client":
        return "The application is not known to Locky."
    text = exc.get_error_description() or exc.error
    return text if text.endswith(".") else text + "."


def _has_code(result) -> bool:
    status, _, headers = result
    location = dict(headers).get("Location", "")
    return status == 302 and "code" in dict(parse_qsl(urlsplit(location).query))


def _refusal(exc: LockyError) -> tuple[int, str, dict[str, str] | None]:
    """The page's status, message and headers for a refused sign-in: the API's."""
    if isinstance(exc, Locked):
        return 429, exc.description, {"Retry-After": str(exc.retry_after)}
    if isinstance(exc, Unauthorized):
        return 401, exc.description, None
    if isinstance(exc, Forbidden):
        return 403, exc.description, None
    if isinstance(exc, Invalid):
        return 400, " ".join(exc.fields.values()), None
    return 503, "Locky cannot sign you in right now; try again in a moment.", None



def routes(context) -> list:
    """The authorization endpoint and its forms' posts: public, outside the Swagger
    document (docs/http/oauth.md describes them)."""
    from locky.routes import Operation, Route

    resource, tag = Authorize(context), "oauth"
    return [
        Route("/oauth/authorize", resource, (
            Operation("get", "Authorization endpoint (sign-in and consent pages)", tag, public=True),
            Operation("post", "Authorization endpoint, form-encoded", tag, public=True),
        ), in_spec=False),
        Route("/oauth/authorize/login", resource, (
            Operation("post", "Sign-in page: email and password", tag, public=True),), suffix="login", in_spec=False),
        Route("/oauth/authorize/passkey", resource, (
            Operation("post", "Sign-in page: a passkey's answer", tag, public=True),), suffix="passkey", in_spec=False),
        Route("/oauth/authorize/code", resource, (
            Operation("post", "Sign-in page: TOTP or recovery code", tag, public=True),), suffix="code", in_spec=False),
        Route("/oauth/authorize/consent", resource, (
            Operation("post", "Consent page: allow or deny", tag, public=True),), suffix="consent", in_spec=False),
    ]
