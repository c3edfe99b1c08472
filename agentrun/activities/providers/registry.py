"""Find providers by name: the built-ins plus the `agentrun.providers` entry points.

Entry points are looked up on every call, not cached, so a plugin installed while a worker is
running is seen on the next task. A plugin cannot replace a built-in name: the engine's own
`shell` and `http` keep working whatever else is installed.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points

from agentrun.activities.providers.base import Provider
from agentrun.activities.providers.http import HttpProvider
from agentrun.activities.providers.shell import ShellProvider

ENTRY_POINT_GROUP = "agentrun.providers"
BUILTINS: dict[str, Callable[[], Provider]] = {"shell": ShellProvider, "http": HttpProvider}


class UnknownProvider(LookupError):
    pass


class ProviderLoadError(RuntimeError):
    pass


def _plugins() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name not in BUILTINS}


def provider_names() -> list[str]:
    return sorted({*BUILTINS, *_plugins()})


def get_provider(name: str) -> Provider:
    if name in BUILTINS:
        return BUILTINS[name]()
    plugin = _plugins().get(name)
    if plugin is None:
        raise UnknownProvider(f"unknown provider {name!r}; known providers: {', '.join(provider_names())}")
    try:
        provider = plugin.load()()
    except Exception as e:
        raise ProviderLoadError(f"provider {name!r} ({plugin.value}) failed to load: {e!r}") from e
    if not callable(getattr(provider, "call", None)):
        raise ProviderLoadError(f"provider {name!r} ({plugin.value}) has no call() method")
    return provider
