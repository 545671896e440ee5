"""The bundled mailers of docs/http/accounts.md (``plugins/locky_mail``): ``file`` and ``smtp``.

The SMTP tests talk to a real ``aiosmtpd`` server on 127.0.0.1: plain, AUTH, STARTTLS
and implicit TLS (``smtps://``) with a certificate made here.
"""

from __future__ import annotations

import datetime
import email
import email.policy
import ipaddress
import logging
import os
import re
import smtplib
import socket
import ssl
import stat
import threading
import time
from email.message import EmailMessage
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import quote

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import locky_mail.smtp as smtp_module
from locky.plugins import DEFAULT_PLUGINS, build_plugin_manager
from locky.registry import Registry
from locky.settings import Settings, SettingsError
from locky_mail import FileMailer, SmtpMailer
from locky_mail.smtp import CleartextRefused, is_loopback, may_send_credentials, parse_smtp_url

USER = "mailer@example.com"
PASSWORD = "s3cr:et/p@ss%w?rd#1"  # needs percent-encoding in a URL
URL_CREDENTIALS = f"{quote(USER, safe='')}:{quote(PASSWORD, safe='')}"


def make_message(n: int = 0, *, to: str = "ada@example.com") -> EmailMessage:
    message = EmailMessage()
    message["To"] = to
    message["From"] = "Locky <locky@example.com>"
    message["Subject"] = f"Your code {n}"
    message.set_content(f"Hello Ada,\n\nyour code is {n:06d}.\n")
    return message


def read_eml(path: Path) -> EmailMessage:
    return email.message_from_bytes(path.read_bytes(), policy=email.policy.default)


# ---------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------


def mailer_registry() -> Registry:
    registry: Registry = Registry("mailer")
    build_plugin_manager(Settings()).hook.locky_register_mailers(registry=registry)
    return registry


def test_the_plugin_is_bundled_and_registers_file_and_smtp():
    assert "locky_mail" in DEFAULT_PLUGINS
    registry = mailer_registry()
    assert {"file", "smtp"} <= set(registry.names())
    assert registry.origin("file").startswith("locky_mail.")


def test_file_is_the_default_and_writes_beside_the_sqlite_database(tmp_path):
    settings = Settings.from_mapping({"database_url": f"sqlite:///{tmp_path}/locky.db"})
    mailer = mailer_registry().create(settings.mailer, SimpleNamespace(settings=settings))
    assert isinstance(mailer, FileMailer)
    assert mailer.directory == tmp_path.resolve() / "mail"


def test_file_mailer_uses_locky_mail_dir(tmp_path):
    settings = Settings.from_mapping({"mail_dir": str(tmp_path / "outbox")})
    mailer = mailer_registry().create("file", SimpleNamespace(settings=settings))
    mailer.send(make_message())
    assert len(list((tmp_path / "outbox").glob("*.eml"))) == 1


def test_smtp_without_url_stops_startup_with_a_clear_message():
    settings = Settings.from_mapping({"mailer": "smtp"})
    with pytest.raises(SettingsError, match=r"LOCKY_MAILER=smtp needs LOCKY_SMTP_URL, e\.g\. smtp://"):
        mailer_registry().create("smtp", SimpleNamespace(settings=settings))


def test_smtp_factory_reads_the_settings():
    settings = Settings.from_mapping({"mailer": "smtp", "smtp_url": "smtps://u:p@mail.example.com",
                                      "smtp_timeout": "7", "mail_from": "Ops <ops@example.com>"})
    mailer = mailer_registry().create("smtp", SimpleNamespace(settings=settings))
    assert isinstance(mailer, SmtpMailer)
    assert (mailer.target.scheme, mailer.target.host, mailer.target.port) == ("smtps", "mail.example.com", 465)
    assert mailer.timeout == 7
    assert mailer.mail_from == "Ops <ops@example.com>"


# ---------------------------------------------------------------------------
# The file mailer
# ---------------------------------------------------------------------------


def test_file_mailer_writes_a_parseable_eml(tmp_path):
    directory = tmp_path / "mail"
    message = make_message(42, to="Ada Lovelace <ada@example.com>")
    FileMailer(directory).send(message)
    (path,) = directory.iterdir()
    assert path.suffix == ".eml"
    read = read_eml(path)
    assert read["To"] == "Ada Lovelace <ada@example.com>"
    assert read["From"] == "Locky <locky@example.com>"
    assert read["Subject"] == "Your code 42"
    assert read.get_content() == "Hello Ada,\n\nyour code is 000042.\n"
    # RFC 5322 wants Date and Message-ID; the caller's message is left as it was.
    assert read["Date"] and read["Message-ID"]
    assert message["Date"] is None and message["Message-ID"] is None
    assert b"\r\n" not in path.read_bytes()  # LF line ends, as in a Maildir


def test_the_link_in_an_eml_file_reads_as_written_in_the_raw_text(tmp_path):
    """Issue 36: the mailed link (and the code) must be copyable from the raw ``.eml``
    file, not quoted-printable (``=3D``, ``=`` soft breaks): the text part is 7bit."""
    from falcon import testing

    from locky import create_app
    from locky.testing import PASSWORD as GOOD_PASSWORD, make_settings

    settings = make_settings(f"sqlite:///{tmp_path / 'locky.sqlite'}").replace(
        public_url="https://auth.example.com", mail_dir=str(tmp_path / "mail"))
    app = create_app(settings)
    try:
        client = testing.TestClient(app)
        made = client.simulate_post("/v1/public/users/register", json={
            "name": "Ada", "email": "ada@example.com", "password": GOOD_PASSWORD})
        assert made.status_code == 201, made.text
        deadline = time.monotonic() + 10
        while not list((tmp_path / "mail").glob("*.eml")) and time.monotonic() < deadline:
            time.sleep(0.05)
        (path,) = (tmp_path / "mail").glob("*.eml")
        raw = path.read_text(encoding="ascii")
        assert "Content-Transfer-Encoding: 7bit" in raw and "=3D" not in raw
        code = re.search(r"^Token: (\S+)$", raw, re.MULTILINE).group(1)
        link = f"https://auth.example.com/console/#/verify?token={quote(code, safe='')}"
        assert f"\nOr open: {link}\n" in raw  # whole, on its own line
        assert read_eml(path).get_content().count(link) == 1
        verified = client.simulate_post("/v1/public/users/verify", json={"token": code})
        assert verified.status_code == 204, verified.text
    finally:
        app.close()


def test_file_mailer_fills_a_missing_from_and_keeps_non_ascii(tmp_path):
    message = EmailMessage()
    message["To"] = "Zoë <zoe@example.com>"
    message["Subject"] = "Bestätigen Sie Ihre Adresse"
    message.set_content("Grüße — ünïcödé\n")
    FileMailer(tmp_path, mail_from="Locky <locky@example.org>").send(message)
    read = read_eml(next(tmp_path.glob("*.eml")))
    assert read["From"] == "Locky <locky@example.org>"
    assert read["To"] == "Zoë <zoe@example.com>"
    assert read["Subject"] == "Bestätigen Sie Ihre Adresse"
    assert read.get_content() == "Grüße — ünïcödé\n"
    assert read["Message-ID"].endswith("@example.org>")
    headers = next(tmp_path.glob("*.eml")).read_bytes().partition(b"\n\n")[0]
    assert headers.isascii()  # RFC 2047-encoded, readable by any MTA


def test_file_modes_0600_and_directory_0700(tmp_path):
    directory = tmp_path / "deep" / "mail"
    old = os.umask(0)  # even with a permissive umask
    try:
        FileMailer(directory).send(make_message())
    finally:
        os.umask(old)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    (path,) = directory.iterdir()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_names_sort_by_time_and_no_temporary_file_is_left(tmp_path):
    mailer = FileMailer(tmp_path)
    for n in range(5):
        mailer.send(make_message(n))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 5 and all(name.endswith(".eml") for name in names)
    stem, _, token = names[0].removesuffix(".eml").partition("-")
    assert stem.isdigit() and len(token) == 8 and int(token, 16) >= 0
    assert [read_eml(tmp_path / name)["Subject"] for name in names] == [f"Your code {n}" for n in range(5)]


def test_many_messages_from_several_threads_are_all_distinct_files(tmp_path):
    mailer = FileMailer(tmp_path / "mail")  # the directory is made by racing threads
    threads, per_thread = 8, 25
    errors = []

    def work(t):
        try:
            for n in range(per_thread):
                mailer.send(make_message(t * 1000 + n))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    files = list((tmp_path / "mail").iterdir())
    assert len(files) == threads * per_thread
    assert all(f.suffix == ".eml" for f in files)
    subjects = {read_eml(f)["Subject"] for f in files}
    assert subjects == {f"Your code {t * 1000 + n}" for t in range(threads) for n in range(per_thread)}


def test_a_drawn_name_that_exists_is_never_overwritten(tmp_path, monkeypatch):
    # Two writers drawing the same name (same nanosecond, same token): the second
    # one draws again instead of replacing the first one's message.
    import locky_mail.files as files

    monkeypatch.setattr(files.time, "time_ns", lambda: 1234)
    tokens = iter(["aaaaaaaa", "aaaaaaaa", "bbbbbbbb"])
    monkeypatch.setattr(files.secrets, "token_hex", lambda n: next(tokens))
    mailer = FileMailer(tmp_path)
    mailer.send(make_message(1))
    mailer.send(make_message(2))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000001234-aaaaaaaa.eml", "00000000000000001234-bbbbbbbb.eml"]
    assert read_eml(tmp_path / "00000000000000001234-aaaaaaaa.eml")["Subject"] == "Your code 1"


def test_a_failed_write_raises_and_leaves_nothing(tmp_path):
    (tmp_path / "mail").write_text("a file where the folder should be")
    with pytest.raises(OSError):
        FileMailer(tmp_path / "mail").send(make_message())


# ---------------------------------------------------------------------------
# SMTP URLs and the clear-text rule
# ---------------------------------------------------------------------------


def test_parse_smtp_url_defaults_and_percent_decoding():
    target = parse_smtp_url(f"smtp://{URL_CREDENTIALS}@mail.example.com")
    assert (target.scheme, target.host, target.port) == ("smtp", "mail.example.com", 587)
    assert (target.user, target.password) == (USER, PASSWORD)
    assert PASSWORD not in repr(target) and "p%40ss" not in repr(target)
    assert parse_smtp_url("smtps://mail.example.com").port == 465
    assert parse_smtp_url("smtp://[::1]:2525").host == "::1"
    anonymous = parse_smtp_url("smtp://relay:25")
    assert (anonymous.port, anonymous.user, anonymous.has_credentials) == (25, None, False)


@pytest.mark.parametrize("url", [
    "http://mail.example.com", "smtp://", "smtp://u:pw@mail.example.com:99999",
    "smtp://u:pw@mail.example.com:587/path", "smtp://onlyuser@mail.example.com",
])
def test_bad_smtp_urls_are_settings_errors_without_the_password(url):
    with pytest.raises(SettingsError) as raised:
        parse_smtp_url(url)
    assert "pw" not in str(raised.value).replace("password", "")


def test_mailer_repr_hides_the_password():
    mailer = SmtpMailer(f"smtp://{URL_CREDENTIALS}@mail.example.com")
    assert PASSWORD not in repr(mailer) and quote(PASSWORD, safe="") not in repr(mailer)
    assert "mail.example.com:587" in repr(mailer)


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.0.0.53", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("LOCALHOST.", True), ("mail.localhost", True), ("mail.example.com", False), ("10.0.0.1", False),
    ("127.example.com", False), ("::ffff:10.0.0.1", False), ("0.0.0.0", False),
])
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_credentials_go_in_clear_only_to_a_loopback_address():
    assert may_send_credentials("mail.example.com", encrypted=True)
    assert not may_send_credentials("mail.example.com", encrypted=False)
    assert not may_send_credentials("192.0.2.7", encrypted=False)
    assert may_send_credentials("127.0.0.1", encrypted=False)
    assert may_send_credentials("localhost", encrypted=False)


# ---------------------------------------------------------------------------
# A real SMTP server
# ---------------------------------------------------------------------------


class Collector:
    """An aiosmtpd handler keeping every envelope and how its session was secured."""

    def __init__(self):
        self.envelopes = []
        self.sessions = []

    async def handle_DATA(self, server, session, envelope):
        self.envelopes.append(envelope)
        tls = server.transport.get_extra_info("ssl_object") is not None  # STARTTLS or implicit TLS
        self.sessions.append(SimpleNamespace(tls=tls, authenticated=session.authenticated,
                                             login=session.login_data))
        return "250 OK"


class Authenticator:
    def __init__(self):
        self.calls = []

    def __call__(self, server, session, envelope, mechanism, auth_data):
        assert isinstance(auth_data, LoginPassword)
        login, password = auth_data.login.decode(), auth_data.password.decode()
        self.calls.append(login)
        ok = (login, password) == (USER, PASSWORD)
        return AuthResult(success=ok, handled=False)  # handled=False: the server answers 535


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for localhost and 127.0.0.1: (cert path, key path)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    directory = tmp_path_factory.mktemp("tls")
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture
def server_tls(certificate):
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    return context


@pytest.fixture
def client_tls(certificate):
    """Trusts the test's certificate only (hostnames checked as usual)."""
    return ssl.create_default_context(cafile=str(certificate[0]))


@pytest.fixture
def smtp_server():
    """Start an aiosmtpd server on 127.0.0.1: ``smtp_server(**controller_options)``."""
    controllers = []

    def start(**options):
        handler = Collector()
        controller = Controller(handler, hostname="127.0.0.1", port=free_port(), **options)
        controller.start()
        controllers.append(controller)
        return controller, handler

    yield start
    for controller in controllers:
        controller.stop()


def check_delivered(handler, message_number=0, *, to="ada@example.com"):
    (envelope,) = handler.envelopes
    assert envelope.mail_from == "locky@example.com"
    assert envelope.rcpt_tos == [to]
    read = email.message_from_bytes(envelope.content, policy=email.policy.default)
    assert read["Subject"] == f"Your code {message_number}"
    assert read["From"] == "Locky <locky@example.com>"
    # On the wire lines end in CRLF.
    assert read.get_content().replace("\r\n", "\n") == f"Hello Ada,\n\nyour code is {message_number:06d}.\n"
    return handler.sessions[0]


def test_plain_delivery(smtp_server):
    controller, handler = smtp_server()
    SmtpMailer(f"smtp://127.0.0.1:{controller.port}", timeout=5).send(make_message(7))
    session = check_delivered(handler, 7)
    assert not session.tls and not session.authenticated


def test_envelope_sender_falls_back_to_mail_from(smtp_server):
    controller, handler = smtp_server()
    message = make_message(1)
    del message["From"]
    SmtpMailer(f"smtp://127.0.0.1:{controller.port}", mail_from="Locky <noreply@example.net>").send(message)
    (envelope,) = handler.envelopes
    assert envelope.mail_from == "noreply@example.net"
    assert message["From"] is None  # the caller's message is kept as it was


def test_auth_login_with_the_url_credentials_on_loopback(smtp_server):
    authenticator = Authenticator()
    controller, handler = smtp_server(authenticator=authenticator, auth_require_tls=False)
    SmtpMailer(f"smtp://{URL_CREDENTIALS}@127.0.0.1:{controller.port}", timeout=5).send(make_message(3))
    session = check_delivered(handler, 3)
    assert session.authenticated and not session.tls
    assert authenticator.calls == [USER]


def test_wrong_password_raises(smtp_server):
    controller, handler = smtp_server(authenticator=Authenticator(), auth_require_tls=False)
    with pytest.raises(smtplib.SMTPAuthenticationError):
        SmtpMailer(f"smtp://{quote(USER, safe='')}:wrong@127.0.0.1:{controller.port}", timeout=5).send(make_message())
    assert handler.envelopes == []


def test_starttls_with_a_self_signed_certificate(smtp_server, server_tls, client_tls):
    authenticator = Authenticator()
    # auth_require_tls (the default): AUTH is only accepted after STARTTLS.
    controller, handler = smtp_server(tls_context=server_tls, require_starttls=True, authenticator=authenticator)
    SmtpMailer(f"smtp://{URL_CREDENTIALS}@127.0.0.1:{controller.port}", timeout=5,
               ssl_context=client_tls).send(make_message(5))
    session = check_delivered(handler, 5)
    assert session.tls and session.authenticated
    assert authenticator.calls == [USER]


def test_starttls_is_used_whenever_offered(smtp_server, server_tls, client_tls):
    controller, handler = smtp_server(tls_context=server_tls)
    SmtpMailer(f"smtp://127.0.0.1:{controller.port}", timeout=5, ssl_context=client_tls).send(make_message())
    assert check_delivered(handler).tls


def test_an_untrusted_certificate_is_refused(smtp_server, server_tls):
    controller, handler = smtp_server(tls_context=server_tls)
    mailer = SmtpMailer(f"smtp://127.0.0.1:{controller.port}", timeout=5)  # the system's authorities
    with pytest.raises(ssl.SSLCertVerificationError):
        mailer.send(make_message())
    assert handler.envelopes == []


def test_smtps_implicit_tls(smtp_server, server_tls, client_tls):
    authenticator = Authenticator()
    # aiosmtpd counts only STARTTLS as TLS for auth_require_tls: this connection is TLS throughout.
    controller, handler = smtp_server(ssl_context=server_tls, authenticator=authenticator, auth_require_tls=False)
    SmtpMailer(f"smtps://{URL_CREDENTIALS}@localhost:{controller.port}", timeout=5,
               ssl_context=client_tls).send(make_message(9))
    session = check_delivered(handler, 9)
    assert session.tls and session.authenticated


def test_credentials_are_not_sent_in_clear_to_a_remote_host(smtp_server, monkeypatch):
    # The server below is local; make the mailer treat it as remote.
    monkeypatch.setattr(smtp_module, "is_loopback", lambda host: False)
    authenticator = Authenticator()
    controller, handler = smtp_server(authenticator=authenticator, auth_require_tls=False)
    mailer = SmtpMailer(f"smtp://{URL_CREDENTIALS}@127.0.0.1:{controller.port}", timeout=5)
    with pytest.raises(CleartextRefused, match="offers no STARTTLS") as raised:
        mailer.send(make_message())
    assert PASSWORD not in str(raised.value)
    assert authenticator.calls == [] and handler.envelopes == []
    # Without credentials the same server gets the message (nothing secret to protect).
    SmtpMailer(f"smtp://127.0.0.1:{controller.port}", timeout=5).send(make_message())
    assert len(handler.envelopes) == 1


def test_a_server_that_is_down_raises_quickly():
    mailer = SmtpMailer(f"smtp://127.0.0.1:{free_port()}", timeout=5)
    started = time.monotonic()
    with pytest.raises((ConnectionRefusedError, smtplib.SMTPException, OSError)):
        mailer.send(make_message())
    assert time.monotonic() - started < 3


def test_a_server_that_never_answers_times_out():
    with socket.socket() as listener:  # accepts connections, never greets
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        mailer = SmtpMailer(f"smtp://127.0.0.1:{listener.getsockname()[1]}", timeout=1)
        started = time.monotonic()
        with pytest.raises((TimeoutError, smtplib.SMTPException, OSError)):
            mailer.send(make_message())
        assert time.monotonic() - started < 4


def test_the_password_never_appears_in_a_log_record(smtp_server, server_tls, client_tls, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)
    failures = []
    plain, _ = smtp_server(authenticator=Authenticator(), auth_require_tls=False)
    tls, _ = smtp_server(tls_context=server_tls, authenticator=Authenticator())
    SmtpMailer(f"smtp://{URL_CREDENTIALS}@127.0.0.1:{plain.port}").send(make_message())
    SmtpMailer(f"smtp://{URL_CREDENTIALS}@127.0.0.1:{tls.port}", ssl_context=client_tls).send(make_message())
    for url in (f"smtp://{URL_CREDENTIALS}@127.0.0.1:{free_port()}",  # down
                f"smtp://{URL_CREDENTIALS}@127.0.0.1:{tls.port}"):  # untrusted certificate
        try:
            SmtpMailer(url, timeout=2).send(make_message())
        except Exception as exc:
            failures.append(exc)
    monkeypatch.setattr(smtp_module, "is_loopback", lambda host: False)
    try:
        SmtpMailer(f"smtp://{URL_CREDENTIALS}@127.0.0.1:{plain.port}").send(make_message())
    except CleartextRefused as exc:
        failures.append(exc)
    assert len(failures) == 3
    logging.getLogger("locky.mail").exception("a failure as the background sender would log it",
                                              exc_info=failures[-1])
    secrets = (PASSWORD, quote(PASSWORD, safe=""))
    assert caplog.records
    for record in caplog.records:
        text = record.getMessage() + (logging.Formatter().formatException(record.exc_info)
                                      if record.exc_info else "")
        assert not any(secret in text for secret in secrets), record
    for failure in failures:
        assert not any(secret in f"{failure!s} {failure!r}" for secret in secrets)
