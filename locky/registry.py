"""Registries of named providers: plugins add factories, settings choose one by name."""

from __future__ import annotations

from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class ProviderError(RuntimeError):
    """A provider name is unknown or registered twice; startup stops with this message."""


class Registry(Generic[T]):
    """Named factories of one kind of provider (storage, tokens, ...)."""

    def __init__(self, kind: str):
        self.kind = kind
        self._factories: dict[str, Callable[..., T]] = {}
        self._origins: dict[str, str] = {}

    def add(self, name: str, factory: Callable[..., T], origin: str | None = None) -> None:
        """Register ``factory`` under ``name``; a second registration of a name is an error."""
        if not name or not isinstance(name, str):
            raise ProviderError(f"a {self.kind} provider needs a non-empty name")
        if name in self._factories:
            raise ProviderError(
                f"{self.kind} provider {name!r} is registered twice"
                f" (by {self._origins[name]} and by {origin or _origin(factory)})"
            )
        self._factories[name] = factory
        self._origins[name] = origin or _origin(factory)

    def names(self) -> list[str]:
        return sorted(self._factories)

    def origin(self, name: str) -> str:
        return self._origins[name]

    def require(self, name: str) -> Callable[..., T]:
        """The factory registered as ``name``; an unknown name lists the known ones."""
        try:
            return self._factories[name]
        except KeyError:
            known = ", ".join(self.names()) or "none"
            raise ProviderError(
                f"unknown {self.kind} provider {name!r}; known: {known}"
            ) from None

    def create(self, name: str, *args: Any, **kwargs: Any) -> T:
        """Build the provider named ``name`` (:meth:`require`)."""
        return self.require(name)(*args, **kwargs)


def _origin(factory: Callable[..., Any]) -> str:
    return f"{getattr(factory, '__module__', '?')}.{getattr(factory, '__qualname__', repr(factory))}"
