"""The token backend contract suite: one set of tests of :class:`locky.providers.TokenBackend`.

Subclass :class:`TokenBackendContract` and override ``make_tokens``: a fixture that
returns ``make(**settings) -> TokenBackend``, a backend built as Locky builds it, from
the test's settings with ``settings`` applied on top (``access_ttl``, ``jwt_issuer``,
``jwt_audience``, ``jwt_secret``, ``database_url``...). With the ``locky_app_factory``
fixture of :mod:`locky.testing` that is one line::

    from locky.testing.token_backend_contract import TokenBackendContract

    class TestPaseto(TokenBackendContract):
        @pytest.fixture
        def make_tokens(self, locky_app_factory):
            return lambda **settings: locky_app_factory(
                plugin_objects=[locky_paseto], tokens="paseto", **settings).context.tokens

Revocation is not the backend's (Locky checks the session in storage on every
request), so the suite does not ask for it. Tokens the OpenID provider issues to a
client (``issue(..., client_id=, scope=)``) give their client and scope back, and ID
tokens (``sign_id_token``) are the claims as given, signed with a ``kid`` in the header
for each of :attr:`TokenBackendContract.id_token_algorithms`, and never pass as an
access or refresh token. Key rotation is not part of the
interface either: a backend that rotates keys overrides :meth:`rotate_keys` and the
suite checks that tokens signed before a rotation stay valid.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any, Callable

import pytest

from locky.errors import Unauthorized
from locky.providers import Claims, IssuedToken, TokenBackend

KINDS = ("access", "refresh")
GARBAGE = ("", "garbage", "a.b.c", "eyJhbGciOiJub25lIn0.e30.", "....", "é" * 40, "x" * 5000, " ", "Bearer x")


def session_ids() -> tuple[str, str]:
    return str(uuid.uuid4()), str(uuid.uuid4())


def tampered(token: str) -> list[str]:
    """Copies of ``token`` with one character changed near a quarter, the middle and
    three quarters of its length (a whole base64 character each: never padding bits),
    one with the last character dropped, one with a character added."""
    copies = []
    for at in (len(token) // 4, len(token) // 2, 3 * len(token) // 4):
        while at < len(token) - 1 and not token[at].isalnum():
            at += 1
        replacement = "A" if token[at] != "A" else "B"
        copies.append(token[:at] + replacement + token[at + 1:])
    return [*copies, token[:-1], token + "A"]


def jws_part(token: str, index: int) -> dict[str, Any]:
    """The header (0) or payload (1) of a compact JWS, unchecked."""
    part = token.split(".")[index]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


class TokenBackendContract:
    """The tests every token backend must pass. Override :meth:`make_tokens`."""

    #: The ``alg`` values ``sign_id_token`` must sign with (docs/http/oauth.md).
    id_token_algorithms = ("RS256", "ES256", "EdDSA")

    @pytest.fixture
    def make_tokens(self) -> Callable[..., TokenBackend]:
        """``make(**settings)``: a backend from the test's settings with ``settings`` on
        top; subclasses override this fixture."""
        pytest.fail("a TokenBackendContract subclass must override the `make_tokens` fixture", pytrace=False)

    @pytest.fixture
    def tokens(self, make_tokens) -> TokenBackend:
        return make_tokens()

    def rotate_keys(self, backend: TokenBackend) -> None:
        """Make ``backend`` sign with a new key. Override when the backend rotates keys."""
        pytest.skip("this token backend has no key rotation (override rotate_keys to check it)")

    def issue_at(self, backend: TokenBackend, moment: float, **arguments: Any) -> IssuedToken:
        """``backend.issue(**arguments)`` as if the clock said ``moment`` (Unix seconds).

        Done by pointing ``time.time`` at that moment during the call; override when the
        backend reads its clock another way."""
        real = time.time
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(time, "time", lambda: moment)
            issued = backend.issue(**arguments)
        assert real is time.time
        return issued

    # -- issue and verify ------------------------------------------------------------

    @pytest.mark.parametrize("kind", KINDS)
    def test_a_token_verifies_with_what_it_was_issued_for(self, tokens, kind):
        user, session = session_ids()
        before = int(time.time())
        issued = tokens.issue(user_uuid=user, session_uuid=session, kind=kind)
        assert isinstance(issued, IssuedToken)
        assert isinstance(issued.token, str) and issued.token and issued.token.isascii()
        assert isinstance(issued.jti, str) and issued.jti
        assert isinstance(issued.expires_in, int) and issued.expires_in > 0
        claims = tokens.verify(issued.token, kind=kind)
        assert isinstance(claims, Claims)
        assert (claims.subject, claims.session_uuid, claims.jti, claims.kind) == (user, session, issued.jti, kind)
        assert before + issued.expires_in - 2 <= claims.expires_at <= int(time.time()) + issued.expires_in + 2

    def test_lifetimes_follow_the_settings(self, make_tokens):
        backend = make_tokens(access_ttl=120, refresh_ttl=3600)
        user, session = session_ids()
        assert backend.issue(user_uuid=user, session_uuid=session, kind="access").expires_in == 120
        assert backend.issue(user_uuid=user, session_uuid=session, kind="refresh").expires_in == 3600

    def test_every_token_has_its_own_jti(self, tokens):
        user, session = session_ids()
        issued = [tokens.issue(user_uuid=user, session_uuid=session, kind="access") for _ in range(5)]
        assert len({i.jti for i in issued}) == 5
        assert len({i.token for i in issued}) == 5

    def test_a_token_verifies_again(self, tokens):
        user, session = session_ids()
        issued = tokens.issue(user_uuid=user, session_uuid=session, kind="access")
        assert tokens.verify(issued.token, kind="access") == tokens.verify(issued.token, kind="access")

    def test_another_backend_of_the_same_deployment_verifies_it(self, tokens, make_tokens):
        """Every worker and host of one deployment (same settings, same storage)
        accepts the tokens of the others."""
        user, session = session_ids()
        issued = tokens.issue(user_uuid=user, session_uuid=session, kind="access")
        assert make_tokens().verify(issued.token, kind="access").jti == issued.jti

    # -- refusals ----------------------------------------------------------------------

    @pytest.mark.parametrize("kind", KINDS)
    def test_the_wrong_kind_is_refused(self, tokens, kind):
        user, session = session_ids()
        issued = tokens.issue(user_uuid=user, session_uuid=session, kind=kind)
        other = "refresh" if kind == "access" else "access"
        with pytest.raises(Unauthorized):
            tokens.verify(issued.token, kind=other)

    @pytest.mark.parametrize("garbage", GARBAGE, ids=range(len(GARBAGE)))
    def test_garbage_is_unauthorized_never_another_error(self, tokens, garbage):
        with pytest.raises(Unauthorized):
            tokens.verify(garbage, kind="access")

    def test_a_tampered_token_is_refused(self, tokens):
        user, session = session_ids()
        token = tokens.issue(user_uuid=user, session_uuid=session, kind="access").token
        for copy in tampered(token):
            assert copy != token
            with pytest.raises(Unauthorized):
                tokens.verify(copy, kind="access")
        assert tokens.verify(token, kind="access").subject == user

    def test_an_expired_token_is_refused(self, tokens):
        user, session = session_ids()
        issued = self.issue_at(tokens, time.time() - 24 * 3600, user_uuid=user, session_uuid=session, kind="access")
        with pytest.raises(Unauthorized):
            tokens.verify(issued.token, kind="access")

    def test_a_token_not_valid_yet_is_refused(self, tokens):
        user, session = session_ids()
        issued = self.issue_at(tokens, time.time() + 3600, user_uuid=user, session_uuid=session, kind="access")
        with pytest.raises(Unauthorized):
            tokens.verify(issued.token, kind="access")

    def test_another_issuer_is_refused(self, tokens, make_tokens):
        user, session = session_ids()
        foreign = make_tokens(jwt_issuer="https://other.example.com")
        issued = foreign.issue(user_uuid=user, session_uuid=session, kind="access")
        with pytest.raises(Unauthorized):
            tokens.verify(issued.token, kind="access")
        assert foreign.verify(issued.token, kind="access").subject == user

    def test_another_audience_is_refused(self, tokens, make_tokens):
        user, session = session_ids()
        foreign = make_tokens(jwt_audience="another-service")
        issued = foreign.issue(user_uuid=user, session_uuid=session, kind="access")
        with pytest.raises(Unauthorized):
            tokens.verify(issued.token, kind="access")

    def test_another_deployment_is_refused(self, tokens, make_tokens, tmp_path):
        """A token of another deployment (its own secret and database) never verifies."""
        user, session = session_ids()
        foreign = make_tokens(jwt_secret="another-deployment-secret-0123456789-abcdef",
                              database_url=f"sqlite:///{tmp_path / 'elsewhere.sqlite'}",
                              mail_dir=str(tmp_path / "elsewhere-mail"))
        issued = foreign.issue(user_uuid=user, session_uuid=session, kind="access")
        with pytest.raises(Unauthorized):
            tokens.verify(issued.token, kind="access")

    # -- tokens of the OpenID provider's clients ------------------------------------------

    @pytest.mark.parametrize("kind", KINDS)
    def test_a_client_token_gives_its_client_and_scope_back(self, tokens, make_tokens, kind):
        user, session = session_ids()
        issued = tokens.issue(user_uuid=user, session_uuid=session, kind=kind, client_id="app-1",
                              scope="openid email offline_access")
        for backend in (tokens, make_tokens()):
            claims = backend.verify(issued.token, kind=kind)
            assert (claims.subject, claims.session_uuid, claims.jti, claims.kind) == (user, session, issued.jti, kind)
            assert (claims.client_id, claims.scope) == ("app-1", "openid email offline_access")

    def test_a_login_token_names_no_client(self, tokens):
        user, session = session_ids()
        claims = tokens.verify(tokens.issue(user_uuid=user, session_uuid=session, kind="access").token, kind="access")
        assert (claims.client_id, claims.scope) == (None, None)

    def test_a_client_credentials_token_names_the_client_as_subject(self, tokens):
        """A machine client's token: ``sub`` the client_id, ``sid`` ``client:<client
        uuid>:<token generation>`` (no login session)."""
        sid = f"client:{uuid.uuid4()}:3"
        issued = tokens.issue(user_uuid="app-2", session_uuid=sid, kind="access", client_id="app-2", scope="reports")
        claims = tokens.verify(issued.token, kind="access")
        assert (claims.subject, claims.session_uuid, claims.client_id, claims.scope) == ("app-2", sid, "app-2", "reports")

    def test_a_client_token_of_another_deployment_is_refused(self, tokens, make_tokens, tmp_path):
        user, session = session_ids()
        foreign = make_tokens(jwt_secret="another-deployment-secret-0123456789-abcdef",
                              database_url=f"sqlite:///{tmp_path / 'elsewhere.sqlite'}",
                              mail_dir=str(tmp_path / "elsewhere-mail"))
        issued = foreign.issue(user_uuid=user, session_uuid=session, kind="access", client_id="app-1", scope="openid")
        with pytest.raises(Unauthorized):
            tokens.verify(issued.token, kind="access")

    def id_token_claims(self) -> dict[str, Any]:
        now = int(time.time())
        user, session = session_ids()
        return {"iss": "https://locky.example", "sub": user, "aud": "app-1", "azp": "app-1", "iat": now,
                "exp": now + 300, "auth_time": now - 10, "nonce": "n-0S6_WzA2Mj", "amr": ["pwd"], "sid": session}

    @pytest.mark.parametrize("alg", ("RS256", "ES256", "EdDSA"))
    def test_an_id_token_is_the_claims_signed_with_a_kid(self, tokens, alg):
        if alg not in self.id_token_algorithms:
            pytest.skip(f"this backend signs no {alg} ID tokens")
        claims = self.id_token_claims()
        token = tokens.sign_id_token(claims, alg=alg)
        assert isinstance(token, str) and token.isascii() and token.count(".") == 2
        header = jws_part(token, 0)
        assert header["alg"] == alg
        assert isinstance(header.get("kid"), str) and header["kid"]
        assert jws_part(token, 1) == claims

    @pytest.mark.parametrize("alg", ("RS256", "ES256", "EdDSA"))
    def test_an_id_token_never_passes_as_a_bearer_token(self, tokens, alg):
        if alg not in self.id_token_algorithms:
            pytest.skip(f"this backend signs no {alg} ID tokens")
        token = tokens.sign_id_token(self.id_token_claims(), alg=alg)
        for kind in KINDS:
            with pytest.raises(Unauthorized):
                tokens.verify(token, kind=kind)

    # -- key rotation (when the backend has it) ---------------------------------------------

    def test_tokens_signed_before_a_rotation_stay_valid(self, tokens, make_tokens):
        user, session = session_ids()
        before = tokens.issue(user_uuid=user, session_uuid=session, kind="refresh")
        self.rotate_keys(tokens)
        after = tokens.issue(user_uuid=user, session_uuid=session, kind="refresh")
        for backend in (tokens, make_tokens()):
            assert backend.verify(before.token, kind="refresh").jti == before.jti
            assert backend.verify(after.token, kind="refresh").jti == after.jti
