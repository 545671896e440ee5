"""What an outside plugin author meets: a plugin's own settings and commands, and the
mistakes that used to fail far from their cause (a misspelt ``[plugins.NAME]`` table, a
plugin object loaded twice, ``Operation("POST", ...)``, a Swagger schema name taken)."""

from __future__ import annotations

import types

import pytest
from marshmallow import Schema, fields

from locky import Operation, Route, SettingsError, create_app, hookimpl
from locky.cli.main import main
from locky.plugins import build_plugin_manager, declared_settings
from locky.testing import make_settings

MEMORY = "sqlite:///:memory:"


def plugin(name: str, **hooks) -> types.ModuleType:
    """A plugin module named ``name`` implementing ``hooks``."""
    module = types.ModuleType(name)
    for hook, function in hooks.items():
        setattr(module, hook, hookimpl(function))
    return module


def colours(settings):
    settings.add_table("colours", {"favourite": "the colour the plugin prefers"})


def test_a_misspelt_plugin_table_stops_startup_naming_the_known_ones():
    settings = make_settings(MEMORY, extra={"colors": {"favourite": "blue"}})
    with pytest.raises(SettingsError) as refused:
        build_plugin_manager(settings, [plugin("locky_paint", locky_add_settings=colours)])
    message = str(refused.value)
    assert message.startswith("no loaded plugin reads [plugins.colors] (did you mean [plugins.colours] for"
                              " [plugins.colors]?)")
    assert "colours" in message and "paint" in message and "mail" in message


def test_an_option_its_table_does_not_declare_stops_startup():
    settings = make_settings(MEMORY, extra={"colours": {"favorite": "blue"}})
    with pytest.raises(SettingsError, match=r"^\[plugins.colours\] holds unknown option\(s\): favorite; known:"
                                            r" favourite$"):
        build_plugin_manager(settings, [plugin("locky_paint", locky_add_settings=colours)])


def test_a_table_named_after_a_loaded_plugin_needs_no_declaration():
    settings = make_settings(MEMORY, extra={"paint": {"anything": 1}, "locky_paint": {}})
    pm = build_plugin_manager(settings, [plugin("locky_paint")])
    assert pm.get_plugin("locky_paint") is not None


def test_declared_tables_and_checks_are_collected():
    def checked(settings):
        raise SettingsError(f"paint needs a brush (authorizer {settings.authorizer})")

    pm = build_plugin_manager(make_settings(MEMORY), [plugin(
        "locky_paint", locky_add_settings=lambda settings: (colours(settings), settings.add_check(checked)))])
    declared = declared_settings(pm)
    assert declared.tables["colours"] == {"favourite": "the colour the plugin prefers"}
    with pytest.raises(SettingsError, match="paint needs a brush"):
        for check in declared.checks:
            check(make_settings(MEMORY))


def test_locky_check_runs_the_plugins_checks(tmp_path, monkeypatch, capsys):
    """The bundled Casbin plugin's check: a policy directory that does not hold the files."""
    monkeypatch.setenv("LOCKY_DATABASE_URL", f"sqlite:///{tmp_path / 'locky.sqlite'}")
    monkeypatch.setenv("LOCKY_POLICY_DIR", str(tmp_path / "nowhere"))
    assert main(["check"]) == 2
    # The last line is the refusal; a warning about the environment may come before it.
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("locky: ") and "nowhere" in error


def test_a_plugin_object_already_loaded_is_registered_once(locky_database_url):
    import locky_casbin

    app = create_app(make_settings(locky_database_url), plugins=[locky_casbin, locky_casbin])
    try:
        assert sum(1 for _, p in app.context.pm.list_name_plugin() if p is locky_casbin) == 1
    finally:
        app.close()


def test_two_different_plugins_of_one_name_stop_startup():
    with pytest.raises(SettingsError, match="two different plugins are named 'locky_paint'"):
        build_plugin_manager(make_settings(MEMORY), [plugin("locky_paint"), plugin("locky_paint")])


def test_an_operation_method_is_any_case_and_checked_where_declared():
    assert Operation("POST", "Add", "paint").method == "post"
    with pytest.raises(ValueError, match=r"^Operation\('FETCH', 'Add'\): the method must be one of get, put, post,"):
        Operation("FETCH", "Add", "paint")


class UserSchema(Schema):
    """A plugin's own ``UserSchema``: apispec names it ``User``, Locky's name."""

    colour = fields.String()


class Palette:
    def on_get(self, req, resp):
        resp.media = {"colour": "blue"}


def test_a_plugin_schema_whose_swagger_name_is_taken_stops_startup(locky_database_url):
    routes = lambda context: [Route("/v1/palette", Palette(), (Operation("GET", "Palette", "paint",  # noqa: E731
                                                                         response=UserSchema),))]
    with pytest.raises(SettingsError, match="^the route /v1/palette: a schema resolves to the Swagger definition"
                                            " name 'User', which another schema already has"):
        create_app(make_settings(locky_database_url), plugins=[plugin("locky_paint", locky_routes=routes)])


def test_a_plugin_definition_of_a_taken_name_stops_startup(locky_database_url):
    def swagger(spec, context):
        spec.components.schema("Group", {"type": "object"})

    with pytest.raises(SettingsError, match='^a locky_swagger hook: Another schema with name "Group" is already'
                                            " registered; Swagger definition names are shared"):
        create_app(make_settings(locky_database_url), plugins=[plugin("locky_paint", locky_swagger=swagger)])


def test_a_plugin_adds_a_command(tmp_path, monkeypatch, capsys):
    """An installed plugin named in LOCKY_PLUGINS adds ``locky paint``, run with the settings."""
    module = tmp_path / "locky_paint_cli.py"
    module.write_text(
        "from locky import hookimpl\n\n"
        "def paint(args, settings):\n"
        "    print(f'painting {args.colour} on {settings.database_url}')\n"
        "    return 3\n\n"
        "@hookimpl\n"
        "def locky_add_commands(subparsers):\n"
        "    command = subparsers.add_parser('paint', help='paint something')\n"
        "    command.add_argument('colour')\n"
        "    command.set_defaults(run=paint)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("LOCKY_PLUGINS", "locky_paint_cli")
    monkeypatch.setenv("LOCKY_DATABASE_URL", MEMORY)
    assert main(["paint", "blue"]) == 3
    assert capsys.readouterr().out == f"painting blue on {MEMORY}\n"


def test_locky_policy_comes_from_the_casbin_plugin_and_reads_no_settings(monkeypatch, capsys):
    monkeypatch.setenv("LOCKY_DATABASE_URL", "nonsense://")  # broken settings: policy still runs
    assert main(["policy", "check"]) == 0
    assert "is in order" in capsys.readouterr().out
