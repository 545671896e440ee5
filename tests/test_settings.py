"""Settings (docs/http/operation.md and house rule 11, fail fast): ``LOCKY_*``
environment variables are parsed and checked once, with a message naming the variable
to fix; a TOML file (``LOCKY_CONFIG`` or ``--config``) sits under the environment;
providers are chosen by name and an unknown name stops startup listing the known
ones; the JWT secret is required (and at least 32 bytes) except with SQLite, where one
is generated once beside the database with mode 0600. The settings that change
behaviour are checked through the HTTP front door too."""

from __future__ import annotations

import os
import stat
import textwrap

import jwt
import pytest

from locky.app import create_app
from locky.settings import Settings, SettingsError
from locky.testing import ADMIN_EMAIL, TEST_SECRET, LockyClient, make_settings


def env(**values: str) -> dict[str, str]:
    return {f"LOCKY_{k.upper()}": v for k, v in values.items()}


# -- defaults and environment -------------------------------------------------------


def test_defaults_with_an_empty_environment():
    settings = Settings.load(environ={})
    assert settings.database_url == "sqlite:///locky.sqlite"
    assert settings.jwt_secret is None
    assert settings.jwt_algorithm == "ES256"  # docs/http/tokens.md: keys made by the service, published as JWKS
    assert (settings.jwt_issuer, settings.jwt_audience) == (None, "locky")
    assert settings.issuer == "http://127.0.0.1:8080"  # http://<host>:<port> when nothing else is set
    assert settings.key_rotation_days == 90
    assert settings.public_url is None
    assert (settings.access_ttl, settings.refresh_ttl) == (15 * 60, 7 * 24 * 3600)
    assert (settings.host, settings.port) == ("127.0.0.1", 8080)
    assert (settings.storage, settings.tokens, settings.password_hasher, settings.authorizer) == (
        "pony", "jwt", "bcrypt", "casbin")
    assert (settings.login_max_failures, settings.login_window) == (5, 15 * 60)
    assert settings.max_body_bytes == 64 * 1024
    assert settings.admin_emails == () and settings.plugins == () and settings.policy_dir is None


def test_every_contract_variable_is_read_from_the_environment(tmp_path):
    settings = Settings.load(environ=env(
        database_url=f"sqlite:///{tmp_path / 'db.sqlite'}",
        jwt_secret=TEST_SECRET,
        access_ttl="60",
        refresh_ttl="3600",
        admin_emails="Boss@Example.com, second@example.com ,,",
        policy_dir=str(tmp_path),
        host="0.0.0.0",
        port="9090",
        storage="pony",
        tokens="jwt",
        password_hasher="bcrypt",
        authorizer="casbin",
        plugins="my.plugin, other.plugin",
    ))
    assert settings.database_url == f"sqlite:///{tmp_path / 'db.sqlite'}"
    assert settings.jwt_secret == TEST_SECRET
    assert (settings.access_ttl, settings.refresh_ttl) == (60, 3600)
    assert settings.admin_emails == ("Boss@Example.com", "second@example.com")
    assert settings.policy_dir == str(tmp_path)
    assert (settings.host, settings.port) == ("0.0.0.0", 9090)
    assert settings.plugins == ("my.plugin", "other.plugin")


def test_other_variables_are_not_settings():
    settings = Settings.load(environ={"PORT": "1", "LOCKY": "x", "locky_port": "2", "JWT_SECRET": "x" * 40})
    assert settings.port == 8080 and settings.jwt_secret is None


def test_values_are_trimmed_but_the_secret_is_kept_as_given():
    secret = " " + TEST_SECRET + " "
    settings = Settings.load(environ=env(port=" 9000 ", host=" localhost ", jwt_secret=secret))
    assert settings.port == 9000 and settings.host == "localhost"
    assert settings.jwt_secret == secret


@pytest.mark.parametrize("algorithm", ["ES256", "EdDSA", "RS256", "HS256", "HS384", "HS512"])
def test_every_contract_algorithm_is_accepted(algorithm):
    assert Settings.load(environ=env(jwt_algorithm=algorithm)).jwt_algorithm == algorithm
    assert Settings.load(environ=env(jwt_algorithm=f" {algorithm} ")).jwt_algorithm == algorithm


@pytest.mark.parametrize(
    "values, issuer",
    [
        ({}, "http://127.0.0.1:8080"),
        ({"host": "0.0.0.0", "port": "9090"}, "http://0.0.0.0:9090"),
        ({"public_url": "https://auth.example.com"}, "https://auth.example.com"),
        ({"public_url": "https://auth.example.com/"}, "https://auth.example.com"),
        ({"public_url": "https://example.com/locky/", "port": "9090"}, "https://example.com/locky"),
        ({"jwt_issuer": "https://issuer.example.com", "public_url": "https://auth.example.com"},
         "https://issuer.example.com"),
        ({"jwt_issuer": "locky"}, "locky"),
    ],
)
def test_the_issuer_is_jwt_issuer_else_public_url_else_host_and_port(values, issuer):
    settings = Settings.load(environ=env(**values))
    assert settings.issuer == issuer
    assert settings.jwt_issuer == values.get("jwt_issuer")


@pytest.mark.parametrize("days", ["0", "1", "90", "3650"])
def test_key_rotation_days_takes_zero_for_never(days):
    assert Settings.load(environ=env(key_rotation_days=days)).key_rotation_days == int(days)


@pytest.mark.parametrize(
    "name, value",
    [
        ("access_ttl", "fifteen"),
        ("access_ttl", "1.5"),
        ("access_ttl", "5"),
        ("access_ttl", "100000"),
        ("refresh_ttl", "0"),
        ("port", "-1"),
        ("port", "65536"),
        ("port", "http"),
        ("workers", "0"),
        ("login_max_failures", "0"),
        ("login_window", "0"),
        ("bcrypt_rounds", "3"),
        ("bcrypt_rounds", "32"),
        ("log_requests", "maybe"),
        ("jwt_algorithm", "none"),
        ("jwt_algorithm", "None"),
        ("jwt_algorithm", ""),
        ("jwt_algorithm", "es256"),
        ("jwt_algorithm", "ES384"),
        ("jwt_algorithm", "ES512"),
        ("jwt_algorithm", "PS256"),
        ("jwt_algorithm", "RS512"),
        ("jwt_algorithm", "Ed25519"),
        ("key_rotation_days", "-1"),
        ("key_rotation_days", "3651"),
        ("key_rotation_days", "ninety"),
        ("public_url", "auth.example.com"),
        ("public_url", "https://auth.example.com/?x=1"),
        ("database_url", "oracle://x"),
        ("database_url", "locky.sqlite"),
        ("storage", ""),
    ],
)
def test_bad_values_stop_with_a_message_naming_the_variable(name, value):
    with pytest.raises(SettingsError) as caught:
        Settings.load(environ=env(**{name: value}))
    assert f"LOCKY_{name.upper()}" in str(caught.value)


@pytest.mark.parametrize("text, expected", [("1", True), ("true", True), ("YES", True), ("on", True),
                                            ("0", False), ("false", False), ("No", False), ("off", False)])
def test_booleans(text, expected):
    assert Settings.load(environ=env(log_requests=text)).log_requests is expected


def test_a_short_secret_is_refused():
    with pytest.raises(SettingsError) as caught:
        Settings.load(environ=env(jwt_secret="abcdefgh" * 3 + "abcdefg"))
    assert "LOCKY_JWT_SECRET" in str(caught.value) and "32" in str(caught.value)
    assert Settings.load(environ=env(jwt_secret="abcdefgh" * 4)).jwt_secret == "abcdefgh" * 4


def test_the_secret_is_counted_in_utf8_bytes():
    secret = "\u00e9\u00e8\u00ea\u00eb\u00e0\u00e2\u00ee\u00ef" * 2  # 16 characters, 32 bytes
    assert Settings.load(environ=env(jwt_secret=secret)).jwt_secret == secret
    with pytest.raises(SettingsError):
        Settings.load(environ=env(jwt_secret=secret[:-1] + "x"))  # 31 bytes


def test_the_secret_never_shows_in_repr():
    settings = Settings.load(environ=env(jwt_secret=TEST_SECRET))
    assert TEST_SECRET not in repr(settings) and TEST_SECRET not in str(settings)


def test_keyword_overrides_beat_the_environment():
    settings = Settings.load(environ=env(port="9000"), port=9100)
    assert settings.port == 9100


def test_unknown_setting_names_in_overrides_are_refused():
    with pytest.raises(SettingsError) as caught:
        Settings.from_mapping({"jwt_secrets": "x"})
    assert "jwt_secrets" in str(caught.value)


# -- TOML ------------------------------------------------------------------------


def write(path, text: str):
    path.write_text(textwrap.dedent(text))
    return path


def test_a_toml_file_supplies_settings(tmp_path):
    config = write(tmp_path / "locky.toml", f"""
        [locky]
        database_url = "sqlite:///{tmp_path / 'toml.sqlite'}"
        jwt_secret = "{TEST_SECRET}"
        access_ttl = 120
        admin_emails = ["a@example.com", "b@example.com"]
        log_requests = false

        [locky.plugins.my_plugin]
        colour = "blue"
    """)
    settings = Settings.load(environ={}, config=config)
    assert settings.access_ttl == 120
    assert settings.jwt_secret == TEST_SECRET
    assert settings.admin_emails == ("a@example.com", "b@example.com")
    assert settings.log_requests is False
    assert settings.extra == {"my_plugin": {"colour": "blue"}}


def test_a_toml_file_without_a_locky_table_works_too(tmp_path):
    config = write(tmp_path / "flat.toml", "port = 9001\nhost = 'localhost'\n")
    settings = Settings.load(environ={}, config=config)
    assert (settings.port, settings.host) == (9001, "localhost")


def test_locky_config_names_the_file_and_the_environment_beats_it(tmp_path):
    config = write(tmp_path / "locky.toml", "[locky]\nport = 9001\naccess_ttl = 120\n")
    settings = Settings.load(environ={"LOCKY_CONFIG": str(config), "LOCKY_PORT": "9002"})
    assert settings.port == 9002  # environment over file
    assert settings.access_ttl == 120


@pytest.mark.parametrize(
    "text, words",
    [
        ("[locky]\nport = ", ["not valid TOML"]),
        ("[locky]\nport = 'eighty'\n", ["LOCKY_PORT"]),
        ("[locky]\nport = true\n", ["LOCKY_PORT"]),
        ("[locky]\nprot = 8080\n", ["prot"]),
        ("[locky]\naccess_ttl = 1\n", ["LOCKY_ACCESS_TTL"]),
    ],
)
def test_bad_toml_files_stop_with_a_message(tmp_path, text, words):
    config = write(tmp_path / "bad.toml", text)
    with pytest.raises(SettingsError) as caught:
        Settings.load(environ={}, config=config)
    for word in words:
        assert word in str(caught.value)


def test_a_missing_toml_file_stops_with_a_message(tmp_path):
    with pytest.raises(SettingsError) as caught:
        Settings.load(environ={}, config=tmp_path / "missing.toml")
    assert "missing.toml" in str(caught.value)


# -- providers by name ---------------------------------------------------------------


@pytest.mark.parametrize(
    "slot, known",
    [("storage", "pony"), ("tokens", "jwt"), ("password_hasher", "bcrypt"), ("authorizer", "casbin")],
)
def test_an_unknown_provider_name_stops_startup_listing_the_known_ones(tmp_path, slot, known):
    settings = make_settings(f"sqlite:///{tmp_path / 'p.sqlite'}", **{slot: "no-such-provider"})
    with pytest.raises(SettingsError) as caught:
        create_app(settings)
    message = str(caught.value)
    assert "no-such-provider" in message
    assert known in message
    assert "known" in message


def test_an_unimportable_plugin_module_stops_startup(tmp_path):
    settings = make_settings(f"sqlite:///{tmp_path / 'p.sqlite'}", plugins=("no_such_module_for_locky",))
    with pytest.raises(SettingsError) as caught:
        create_app(settings)
    assert "no_such_module_for_locky" in str(caught.value)


# -- the JWT secret ------------------------------------------------------------------


@pytest.mark.parametrize("url", ["postgres://locky:pw@127.0.0.1:1/locky", "postgresql://u@h/db", "mysql://u:p@127.0.0.1:1/db"])
def test_other_databases_need_a_secret(url):
    settings = Settings.load(environ=env(database_url=url))
    with pytest.raises(SettingsError) as caught:
        settings.with_secret()
    assert "LOCKY_JWT_SECRET" in str(caught.value)
    with pytest.raises(SettingsError):
        create_app(settings)


def test_sqlite_generates_a_private_secret_once(tmp_path):
    settings = Settings.load(environ=env(database_url=f"sqlite:///{tmp_path / 'data' / 'gen.sqlite'}"))
    first = settings.with_secret()
    path = tmp_path / "data" / "gen.sqlite.secret"
    assert path.exists()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert len(first.jwt_secret.encode()) >= 32
    assert first.jwt_secret == path.read_text().strip()
    assert settings.with_secret().jwt_secret == first.jwt_secret  # reused, not replaced


def test_a_relative_sqlite_path_keeps_its_secret_beside_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Settings.load(environ=env(database_url="sqlite:///rel.sqlite")).with_secret()
    assert (tmp_path / "rel.sqlite.secret").exists()


def test_a_given_secret_writes_no_file(tmp_path):
    settings = make_settings(f"sqlite:///{tmp_path / 'given.sqlite'}")
    assert settings.with_secret().jwt_secret == TEST_SECRET
    assert not (tmp_path / "given.sqlite.secret").exists()


def test_a_too_short_stored_secret_is_refused(tmp_path):
    (tmp_path / "short.sqlite.secret").write_text("tiny\n")
    settings = Settings.load(environ=env(database_url=f"sqlite:///{tmp_path / 'short.sqlite'}"))
    with pytest.raises(SettingsError) as caught:
        settings.with_secret()
    assert "short.sqlite.secret" in str(caught.value)


def test_an_in_memory_database_gets_a_process_secret():
    settings = Settings.load(environ=env(database_url="sqlite:///:memory:")).with_secret()
    assert len(settings.jwt_secret.encode()) >= 32


# -- through the front door ----------------------------------------------------------


def test_environment_settings_take_effect_over_http(tmp_path):
    settings = Settings.load(environ=env(
        database_url=f"sqlite:///{tmp_path / 'http.sqlite'}",
        jwt_secret=TEST_SECRET,
        access_ttl="120",
        admin_emails="Boss@Example.com",
        bcrypt_rounds="4",
        login_max_failures="2",
    ))
    app = create_app(settings)
    try:
        client = LockyClient(app)
        boss = client.account("boss@example.com")  # admin emails match regardless of case
        plain = client.account("plain@example.com")
        assert client.simulate_post("/v1/public/users/login",
                                    json={"email": "boss@example.com", "password": boss.password}).json["expires_in"] == 120
        # A listed email makes an admin once its account has verified the address.
        assert client.simulate_put(f"/v1/private/users/{plain.id}", json={"name": "By Boss"},
                                   headers=boss.headers).status_code == 403
        client.verify("boss@example.com")
        assert client.simulate_put(f"/v1/private/users/{plain.id}", json={"name": "By Boss"},
                                   headers=boss.headers).status_code == 200
        assert client.simulate_put(f"/v1/private/users/{boss.id}", json={"name": "By Plain"},
                                   headers=plain.headers).status_code == 403
        for _ in range(2):
            assert client.simulate_post("/v1/public/users/login",
                                        json={"email": "plain@example.com", "password": "wrong password"}).status_code == 401
        assert client.simulate_post("/v1/public/users/login",
                                    json={"email": "plain@example.com", "password": plain.password}).status_code == 429
    finally:
        app.close()


@pytest.mark.parametrize(
    "values, issuer",
    [
        ({}, "http://127.0.0.1:8080"),
        ({"port": "9191"}, "http://127.0.0.1:9191"),
        ({"public_url": "https://auth.example.com/"}, "https://auth.example.com"),
        ({"public_url": "https://auth.example.com", "jwt_issuer": "urn:example:locky"}, "urn:example:locky"),
    ],
)
def test_the_issuer_setting_shows_in_tokens_and_metadata(tmp_path, values, issuer):
    settings = Settings.load(environ=env(
        database_url=f"sqlite:///{tmp_path / 'iss.sqlite'}", jwt_secret=TEST_SECRET, bcrypt_rounds="4", **values))
    app = create_app(settings)
    try:
        client = LockyClient(app)
        token = client.account("ada@example.com").access_token
        assert jwt.decode(token, options={"verify_signature": False})["iss"] == issuer
        metadata = client.simulate_get("/.well-known/oauth-authorization-server").json
        assert metadata["issuer"] == issuer
        if "public_url" in values:
            assert metadata["jwks_uri"] == "https://auth.example.com/.well-known/jwks.json"
    finally:
        app.close()


# The 45-byte test secret is short of RFC 7518's key size for HS384/HS512 (PyJWT warns).
@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")
@pytest.mark.parametrize("algorithm", ["ES256", "EdDSA", "RS256", "HS256", "HS384", "HS512"])
def test_the_algorithm_setting_signs_the_tokens(tmp_path, algorithm):
    settings = Settings.load(environ=env(
        database_url=f"sqlite:///{tmp_path / 'alg.sqlite'}", jwt_secret=TEST_SECRET, bcrypt_rounds="4",
        jwt_algorithm=algorithm))
    app = create_app(settings)
    try:
        client = LockyClient(app)
        account = client.account("ada@example.com")
        header = jwt.get_unverified_header(account.access_token)
        assert header["alg"] == algorithm
        assert ("kid" in header) is (not algorithm.startswith("HS"))
        assert client.simulate_get("/v1/internal/users/me", headers=account.headers).status_code == 200
    finally:
        app.close()


def test_max_body_bytes_is_configurable(tmp_path):
    app = create_app(make_settings(f"sqlite:///{tmp_path / 'body.sqlite'}", max_body_bytes=1024))
    try:
        client = LockyClient(app)
        result = client.simulate_post("/v1/public/users/register",
                                      json={"name": "n" * 2000, "email": "a@example.com", "password": "password-1"})
        assert result.status_code == 413
    finally:
        app.close()


def test_the_test_helpers_admin_is_an_admin(locky_client, locky_admin, locky_user):
    assert locky_admin.email == ADMIN_EMAIL
    assert locky_client.simulate_delete(f"/v1/private/users/{locky_user.id}", headers=locky_admin.headers).status_code == 204


# The settings the bundled plugins declare (locky_add_settings): read and refused as before.

PLUGIN_SETTINGS = {"policy_dir": "locky_casbin", "smtp_url": "locky_mail", "smtp_timeout": "locky_mail",
                   "bcrypt_rounds": "locky_bcrypt", "jwt_audience": "locky_jwt", "key_rotation_days": "locky_jwt",
                   **dict.fromkeys(("database_pool_size", "database_pool_timeout", "database_pooler",
                                    "database_replica_urls", "database_replica_max_lag", "auth_cache",
                                    "auth_cache_lease_ms", "database_listen_url"), "locky_pony")}


def test_the_bundled_plugins_declare_their_own_settings():
    import dataclasses

    from locky.plugins import bundled_settings

    declared = bundled_settings().settings
    assert set(PLUGIN_SETTINGS) <= set(declared)
    own = {f.name for f in dataclasses.fields(Settings)}
    assert not own & set(PLUGIN_SETTINGS)  # the core holds none of them
    assert set(PLUGIN_SETTINGS) <= set(Settings.names())
    assert (Settings().policy_dir, Settings().smtp_url, Settings().smtp_timeout, Settings().bcrypt_rounds) == (
        None, None, 10, 12)


@pytest.mark.parametrize("plugin", sorted(set(PLUGIN_SETTINGS.values())))
def test_each_plugin_declares_the_settings_it_reads(plugin):
    import importlib

    import pluggy

    from locky import hookspecs
    from locky.plugins import declared_settings

    pm = pluggy.PluginManager("locky")
    pm.add_hookspecs(hookspecs)
    pm.register(importlib.import_module(plugin), name=plugin)
    assert set(declared_settings(pm).settings) == {name for name, by in PLUGIN_SETTINGS.items() if by == plugin}


def test_the_storage_settings_keep_their_variables_and_defaults(tmp_path):
    assert {name: Settings.default_of(name) for name in PLUGIN_SETTINGS if PLUGIN_SETTINGS[name] == "locky_pony"} == {
        "database_pool_size": 5, "database_pool_timeout": 5, "database_pooler": "none", "database_replica_urls": (),
        "database_replica_max_lag": 5, "auth_cache": "auto", "auth_cache_lease_ms": 1000,
        "database_listen_url": None}
    config = tmp_path / "locky.toml"
    config.write_text('[locky]\ndatabase_url = "postgres://locky@db/locky"\ndatabase_pool_timeout = 7\n'
                      'database_replica_urls = ["postgres://locky:secret@standby/locky"]\n')
    settings = Settings.load({"LOCKY_DATABASE_POOL_SIZE": "9", "LOCKY_DATABASE_POOLER": "transaction",
                              "LOCKY_AUTH_CACHE": "notify",
                              "LOCKY_DATABASE_LISTEN_URL": "postgres://locky:secret@primary/locky"},
                             config=config, auth_cache_lease_ms=500)
    assert (settings.database_pool_size, settings.database_pool_timeout, settings.database_pooler,
            settings.database_replica_urls, settings.auth_cache, settings.auth_cache_lease_ms,
            settings.database_listen_url) == (9, 7, "transaction", ("postgres://locky:secret@standby/locky",),
                                              "notify", 500, "postgres://locky:secret@primary/locky")
    assert "secret" not in repr(settings)
    copy = settings.replace(port=9000)
    assert (copy.database_pool_size, copy.auth_cache) == (9, "notify")


def test_a_copy_on_an_in_memory_database_leaves_the_storage_servers_out():
    settings = Settings.load({"LOCKY_DATABASE_URL": "postgres://locky@db/locky", "LOCKY_AUTH_CACHE": "notify",
                              "LOCKY_DATABASE_REPLICA_URLS": "postgres://locky@standby/locky",
                              "LOCKY_DATABASE_LISTEN_URL": "postgres://locky@primary/locky",
                              "LOCKY_DATABASE_POOL_SIZE": "9", "LOCKY_BCRYPT_ROUNDS": "5"})
    copy = settings.in_memory("sqlite:///:memory:")
    assert (copy.database_url, copy.database_replica_urls, copy.auth_cache, copy.database_listen_url) == (
        "sqlite:///:memory:", (), "auto", None)
    assert (copy.database_pool_size, copy.bcrypt_rounds) == (9, 5)  # the others kept


def test_plugin_settings_come_from_the_environment_the_file_and_overrides(tmp_path):
    config = tmp_path / "locky.toml"
    config.write_text('[locky]\npolicy_dir = "/srv/policy"\nsmtp_timeout = 7\n')
    settings = Settings.load({"LOCKY_BCRYPT_ROUNDS": "5", "LOCKY_SMTP_TIMEOUT": "9"}, config=config,
                             smtp_url="smtps://mail.example.com")
    assert (settings.policy_dir, settings.smtp_timeout, settings.bcrypt_rounds, settings.smtp_url) == (
        "/srv/policy", 9, 5, "smtps://mail.example.com")
    copy = settings.replace(port=9000)
    assert (copy.port, copy.bcrypt_rounds, copy.policy_dir) == (9000, 5, "/srv/policy")
    assert settings.replace(bcrypt_rounds=6).bcrypt_rounds == 6
    assert "smtps://" not in repr(settings)


@pytest.mark.parametrize(("values", "message"), [
    ({"bcrypt_rounds": "3"}, "LOCKY_BCRYPT_ROUNDS must be between 4 and 31"),
    ({"bcrypt_rounds": "many"}, "LOCKY_BCRYPT_ROUNDS must be an integer (got 'many')"),
    ({"smtp_timeout": "0"}, "LOCKY_SMTP_TIMEOUT must be between 1 and 300"),
    ({"key_rotation_days": "3651"}, "LOCKY_KEY_ROTATION_DAYS must be between 0 and 3650"),
    ({"smtp_url": "http://mail.example.com"}, "LOCKY_SMTP_URL must start with smtp:// (STARTTLS) or smtps://"
                                              " (TLS), e.g. smtp://user:password@mail.example.com:587"),
    ({"polcy_dir": "/srv"}, "unknown setting(s): polcy_dir"),
    ({"database_pooler": "statement"}, "LOCKY_DATABASE_POOLER must be one of none, session, transaction"
                                       " (got 'statement')"),
    ({"database_pool_size": "0"}, "LOCKY_DATABASE_POOL_SIZE must be between 1 and 1000"),
    ({"database_pool_timeout": "soon"}, "LOCKY_DATABASE_POOL_TIMEOUT must be an integer (got 'soon')"),
    ({"database_replica_max_lag": "3601"}, "LOCKY_DATABASE_REPLICA_MAX_LAG must be between 1 and 3600"),
    ({"database_replica_urls": "postgres://standby/locky"}, "LOCKY_DATABASE_REPLICA_URLS needs a PostgreSQL"
                                                            " LOCKY_DATABASE_URL (read replicas are PostgreSQL's"
                                                            " streaming standbys)"),
    ({"database_url": "postgres://db/locky", "database_replica_urls": "postgres://a/locky, mysql://b/locky"},
     "LOCKY_DATABASE_REPLICA_URLS: each replica must be a postgres:// URL (comma-separated)"),
    ({"auth_cache": "redis"}, "LOCKY_AUTH_CACHE must be one of off, notify, version, revision, auto (got 'redis')"),
    ({"database_listen_url": "mysql://db/locky"}, "LOCKY_DATABASE_LISTEN_URL must be a postgres:// URL (the"
                                                  " primary, not through a transaction-pooling proxy)"),
    ({"database_url": "postgres://db/locky", "auth_cache": "notify", "database_pooler": "transaction"},
     "LOCKY_AUTH_CACHE=notify behind LOCKY_DATABASE_POOLER=transaction needs LOCKY_DATABASE_LISTEN_URL: a direct"
     " connection to the primary (LISTEN does not pass transaction pooling)"),
])
def test_plugin_settings_are_refused_in_lockys_words(values, message):
    with pytest.raises(SettingsError) as refused:
        Settings.from_mapping(values)
    assert str(refused.value) == message


def test_a_misspelt_plugin_variable_is_named_with_the_right_one(caplog):
    Settings.load({"LOCKY_POLCY_DIR": "/srv"})
    assert "LOCKY_POLCY_DIR (did you mean LOCKY_POLICY_DIR?)" in caplog.text
