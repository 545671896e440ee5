"""SCIM's libraries load on an app's first SCIM request, not at startup
(:mod:`locky.scim.routes`): importing ``scim2-models`` builds its pydantic models, which
took longer than the rest of ``locky serve``'s start. Each test runs in a fresh Python
process, since this one has loaded them already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

SCRIPT_HEAD = """
import json, sys, threading
import falcon.testing
from locky.app import create_app
from locky.settings import Settings
"""


def run(tmp_path, body: str) -> dict:
    env = {key: value for key, value in os.environ.items() if not key.startswith("LOCKY_")}
    env.update(LOCKY_DATABASE_URL=f"sqlite:///{tmp_path / 'locky.sqlite'}", LOCKY_BCRYPT_ROUNDS="4",
               LOCKY_JWT_SECRET="scim-loading-test-secret-0123456789-abcdefghijkl")
    done = subprocess.run([sys.executable, "-c", SCRIPT_HEAD + textwrap.dedent(body)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_app_loads_the_scim_libraries_on_its_first_scim_request_and_serves_it(tmp_path):
    seen = run(tmp_path, """
        app = create_app(Settings.load())
        client = falcon.testing.TestClient(app)
        before = sorted(name for name in ("scim2_models", "scim2_server", "pydantic") if name in sys.modules)
        health = client.simulate_get("/v1/public/health").status_code
        unauthenticated = client.simulate_get("/scim/v2/Users")
        after_401 = "scim2_models" in sys.modules
        config = client.simulate_get("/scim/v2/ServiceProviderConfig")
        print(json.dumps({"before": before, "health": health, "401": [unauthenticated.status_code,
                          unauthenticated.headers.get("content-type"), unauthenticated.json["schemas"]],
                          "after_401": after_401, "config": [config.status_code, config.json["schemas"],
                          config.json["filter"]], "after": "scim2_models" in sys.modules}))
    """)
    assert seen["before"] == [], "the SCIM libraries (or pydantic) were loaded before any SCIM request"
    assert seen["health"] == 200
    # Locky's authentication refuses before the protocol runs: the SCIM error shape
    # without loading the libraries.
    assert seen["401"] == [401, "application/scim+json", ["urn:ietf:params:scim:api:messages:2.0:Error"]]
    assert seen["after_401"] is False
    assert seen["config"] == [200, ["urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"],
                              {"supported": True, "maxResults": 200}]
    assert seen["after"] is True


def test_first_scim_requests_arriving_together_build_one_protocol_and_are_all_answered(tmp_path):
    seen = run(tmp_path, """
        from locky.scim import protocol

        built = []
        original = protocol.ScimProtocol.__init__

        def counting(self, context):
            built.append(threading.get_ident())
            original(self, context)

        protocol.ScimProtocol.__init__ = counting
        app = create_app(Settings.load())
        client = falcon.testing.TestClient(app)
        start = threading.Barrier(8)
        answers = []

        def ask(path):
            start.wait()
            result = client.simulate_get(path)
            answers.append((path, result.status_code, result.json["schemas"][0]))

        paths = ["/scim/v2/ServiceProviderConfig", "/scim/v2/ResourceTypes", "/scim/v2/Schemas",
                 "/scim/v2/ResourceTypes/User"] * 2
        threads = [threading.Thread(target=ask, args=(path,)) for path in paths]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(json.dumps({"built": len(built), "answers": sorted(answers)}))
    """)
    assert seen["built"] == 1
    assert sorted(seen["answers"]) == sorted([
        ["/scim/v2/ResourceTypes", 200, "urn:ietf:params:scim:api:messages:2.0:ListResponse"],
        ["/scim/v2/ResourceTypes/User", 200, "urn:ietf:params:scim:schemas:core:2.0:ResourceType"],
        ["/scim/v2/Schemas", 200, "urn:ietf:params:scim:api:messages:2.0:ListResponse"],
        ["/scim/v2/ServiceProviderConfig", 200, "urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"],
    ] * 2)


def test_an_app_without_the_scim_libraries_does_not_start(tmp_path):
    """A broken installation stops startup, as it did when the libraries loaded there."""
    seen = run(tmp_path, """
        from locky.settings import SettingsError

        sys.modules["scim2_server"] = None  # as if it were not installed
        try:
            create_app(Settings.load())
        except SettingsError as error:
            print(json.dumps({"error": str(error)}))
        else:
            print(json.dumps({"error": None}))
    """)
    assert seen["error"] == ("SCIM needs scim2_server, which is not installed: reinstall Locky (pip install locky),"
                             " or turn SCIM off (LOCKY_BLOCK_PLUGINS=locky.scim.routes)")


def test_locky_check_loads_the_scim_libraries_and_names_one_that_does_not_load(tmp_path):
    """``locky check`` does what a worker's first SCIM request does, so a SCIM library of
    a version that does not load is found before a provisioning system finds it."""
    seen = run(tmp_path, """
        from locky.scim.routes import check_protocol
        from locky.settings import SettingsError

        settings = Settings.load()
        check_protocol(settings)
        loaded = "scim2_server.handler" in sys.modules
        for name in [name for name in sys.modules if name.startswith(("scim2_server", "locky.scim.protocol"))]:
            del sys.modules[name]
        sys.modules["scim2_server.handler"] = None  # installed, but a module of it does not import
        try:
            check_protocol(settings)
        except SettingsError as error:
            print(json.dumps({"loaded": loaded, "error": str(error)}))
        else:
            print(json.dumps({"loaded": loaded, "error": None}))
    """)
    assert seen["loaded"] is True
    assert seen["error"] == ("SCIM does not load (ModuleNotFoundError: import of scim2_server.handler halted;"
                             " None in sys.modules): reinstall Locky with its dependencies (pip install locky),"
                             " or turn SCIM off (LOCKY_BLOCK_PLUGINS=locky.scim.routes)")
