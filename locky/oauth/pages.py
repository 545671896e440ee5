"""The OpenID provider's pages (docs/http/oauth.md): sign-in, second factor, consent,
errors and signed-out, rendered on the server from ``templates/`` with every value
HTML-escaped. They need no JavaScript and take their look from the console's CSS.

Every page goes out with the same strict headers: styles and images only from Locky, no
framing, no caching, no referrer, and no script at all except on the sign-in page,
which runs one file of Locky's own (``/console/signin-passkey.js``: "Sign in with a
passkey", docs/http/accounts.md#passkeys) and may call Locky alone; without it that page works as before.
Forms may post only to Locky, and to the origin of the verified redirect URI the flow
ends at: Chrome and Safari apply ``form-action`` to the redirect that answers a form's
post too, so ``'self'`` alone would stop the sign-in's last step (the redirect to the
client).
"""

from __future__ import annotations

import functools
import html
from pathlib import Path
from string import Template
from urllib.parse import urlencode, urlsplit

import falcon

TEMPLATES = Path(__file__).resolve().parent / "templates"
#: What each scope lets a client do, in the consent page's words.
SCOPE_WORDS = {
    "openid": "Know who you are (sign you in)",
    "profile": "See your name",
    "email": "See your email address and whether it is verified",
    "groups": "See the names of your groups",
    "offline_access": "Stay signed in when you are away (a refresh token)",
}
ERROR_ID = "form-error"


class Markup(str):
    """Text already HTML (a rendered fragment): inserted as it is."""


@functools.cache
def template(name: str) -> Template:
    return Template((TEMPLATES / name).read_text(encoding="utf-8"))


def render(name: str, **values: object) -> str:
    """The template ``name`` with ``values`` substituted: :class:`Markup` as it is,
    anything else escaped (quotes too: values land in attributes)."""
    return template(name).substitute({key: value if isinstance(value, Markup) else html.escape(str(value))
                                      for key, value in values.items()})


def origin(uri: str | None) -> str | None:
    """``scheme://host[:port]`` of an absolute URI, or ``None``."""
    if not uri:
        return None
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}"


#: What the sign-in page adds to the policy: its passkey script, Locky's own file, which
#: asks Locky (and nobody else) for the ceremony's options.
SCRIPT_SOURCES = "script-src 'self'; connect-src 'self'; "


def content_security_policy(redirect_uri: str | None = None, *, scripts: bool = False) -> str:
    form_action = "'self'"
    redirect_origin = origin(redirect_uri)
    if redirect_origin:
        form_action += " " + redirect_origin
    return ("default-src 'none'; " + (SCRIPT_SOURCES if scripts else "") + "style-src 'self'; img-src 'self'; "
            f"form-action {form_action}; frame-ancestors 'none'; base-uri 'none'")


def page_headers(resp: falcon.Response, redirect_uri: str | None = None, *, scripts: bool = False) -> None:
    """The headers of every page, and of the redirects that end a form's post."""
    resp.set_header("Content-Security-Policy", content_security_policy(redirect_uri, scripts=scripts))
    resp.set_header("X-Frame-Options", "DENY")
    resp.set_header("X-Content-Type-Options", "nosniff")
    resp.set_header("Referrer-Policy", "no-referrer")
    resp.cache_control = ["no-store"]
    resp.set_header("Pragma", "no-cache")


def send(resp: falcon.Response, status: int, title: str, body: str, redirect_uri: str | None = None,
         headers: dict[str, str] | None = None, *, scripts: bool = False) -> None:
    page_headers(resp, redirect_uri, scripts=scripts)
    for name, value in (headers or {}).items():
        resp.set_header(name, value)
    resp.status = falcon.code_to_http_status(status)
    resp.content_type = "text/html; charset=utf-8"
    resp.text = render("base.html", title=title, body=Markup(body))


def _error(message: str | None) -> Markup:
    if not message:
        return Markup("")
    return Markup(f'        <p class="notice error" role="alert" id="{ERROR_ID}">{html.escape(message)}</p>')


def carried(params) -> str:
    """The authorization request's parameters as one hidden field's value."""
    return urlencode(list(params))


def signin(resp, *, status: int = 200, client_name: str, request: str, csrf_token: str, email: str = "",
           error: str | None = None, redirect_uri: str | None = None, headers: dict[str, str] | None = None,
           fields_at_fault: bool = True) -> None:
    """The sign-in page; ``fields_at_fault``: ``error`` is about the email and password
    (marked invalid for screen readers), not about a passkey's answer."""
    described = Markup(f' aria-describedby="{ERROR_ID}" aria-invalid="true"' if error and fields_at_fault else "")
    body = render("signin.html", client_name=client_name, request=request, csrf_token=csrf_token, email=email,
                  error=_error(error), described=described,
                  autofocus_email=Markup("" if email else " autofocus"),
                  autofocus_password=Markup(" autofocus" if email else ""))
    send(resp, status, "Sign in", body, redirect_uri, headers, scripts=True)


def code(resp, *, status: int = 200, client_name: str, request: str, csrf_token: str, mfa_token: str,
         error: str | None = None, redirect_uri: str | None = None, headers: dict[str, str] | None = None) -> None:
    body = render("code.html", client_name=client_name, request=request, csrf_token=csrf_token,
                  mfa_token=mfa_token, error=_error(error),
                  code_described="code-hint" + (f" {ERROR_ID}" if error else ""))
    send(resp, status, "Two-step verification", body, redirect_uri, headers)


def consent(resp, *, client_name: str, email: str, scopes: list[str], request: str, csrf_token: str,
            fresh: str = "", redirect_uri: str | None = None) -> None:
    items = "\n".join(f"          <li>{html.escape(SCOPE_WORDS.get(scope, scope))}"
                      f" <code>{html.escape(scope)}</code></li>" for scope in scopes)
    body = render("consent.html", client_name=client_name, email=email, scopes=Markup(items), request=request,
                  csrf_token=csrf_token, fresh=fresh)
    send(resp, 200, f"Allow {client_name}?", body, redirect_uri)


def error(resp, message: str, *, status: int = 400, heading: str = "This sign-in request cannot be used") -> None:
    """An error that is not sent back to the client (no verified redirect URI)."""
    send(resp, status, heading, render("error.html", heading=heading, message=message))


def signed_out(resp) -> None:
    send(resp, 200, "Signed out", render("signed_out.html"))
