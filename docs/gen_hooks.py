"""Write ``docs/hooks.md`` from ``locky/hookspecs.py``: every hook under its exact
signature, with its options and docstring, grouped by the banners of the spec module.

    python docs/gen_hooks.py          # rewrite docs/hooks.md
    python docs/gen_hooks.py --check  # exit 1 when docs/hooks.md is out of date

``tests/test_docs.py`` fails when the page and the specifications disagree.
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

from locky import hookspecs

PAGE = Path(__file__).resolve().parent / "hooks.md"
BANNER = re.compile(r"^# -{10,}\n# (?P<title>[^\n]+)\n# -{10,}$", re.MULTILINE)
HEADER = """# Locky hooks

<!-- Generated from locky/hookspecs.py by docs/gen_hooks.py; do not edit by hand. -->

Every hook a Locky plugin can implement, in the order of `locky/hookspecs.py`, under its
exact signature. Implement one with a function of the same name marked `@locky.hookimpl`;
it may take any subset of the arguments, by name. The [plugin author's guide](plugins.md)
explains how plugins are found, loaded and tested.

Unless marked otherwise, every implementation is called and the results come back as a
list (hooks documented to return nothing ignore them). *firstresult*: implementations
are called one at a time (last registered first) until one returns something other than
`None`, which is the result. *historic*: a plugin registered later still gets the calls
made before it was registered.
"""


def hooks() -> list:
    """The hook specifications, in source order."""
    found = [f for name, f in vars(hookspecs).items() if name.startswith("locky_") and hasattr(f, "locky_spec")]
    return sorted(found, key=lambda f: inspect.getsourcelines(f)[1])


def signature(func) -> str:
    """``name(arg: annotation, ...) -> annotation`` as written in the spec module."""
    params = inspect.signature(func).parameters.values()
    args = ", ".join(f"{p.name}: {p.annotation}" if p.annotation is not p.empty else p.name for p in params)
    result = inspect.signature(func).return_annotation
    return f"{func.__name__}({args})" + (f" -> {result}" if result is not inspect.Signature.empty else "")


def options(func) -> list[str]:
    spec = func.locky_spec
    return [name for name in ("firstresult", "historic") if spec.get(name)]


def docstring(func) -> str:
    """The docstring in Markdown: Sphinx roles and double backquotes become code spans."""
    text = inspect.cleandoc(func.__doc__ or "").strip()
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def sections() -> list[tuple[str, list]]:
    """``(banner title, hooks under it)`` in source order."""
    source = Path(hookspecs.__file__).read_text()
    banners = [(source.count("\n", 0, m.start()) + 1, m.group("title").strip()) for m in BANNER.finditer(source)]
    grouped: list[tuple[str, list]] = []
    for func in hooks():
        line = inspect.getsourcelines(func)[1]
        title = next((t for start, t in reversed(banners) if start < line), "Hooks")
        if not grouped or grouped[-1][0] != title:
            grouped.append((title, []))
        grouped[-1][1].append(func)
    return grouped


def render() -> str:
    out = [HEADER]
    for title, funcs in sections():
        out.append(f"## {title}\n")
        for func in funcs:
            out.append(f"### `{signature(func)}`\n")
            marks = options(func)
            if marks:
                out.append(" ".join(f"*{m}*" for m in marks) + "\n")
            out.append(docstring(func) + "\n")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not PAGE.exists() or PAGE.read_text() != text:
            print(f"{PAGE} is out of date: run python docs/gen_hooks.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
