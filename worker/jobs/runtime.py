"""What a worker process builds once in main() and every job it runs uses.

RQ imports a job's function by its dotted path, so the job cannot be handed its collaborators
as arguments. The worker's main() installs them here before any job runs (forked work horses
inherit them); a job run by a plain `rq worker` falls back to building them from the
environment.
"""

from __future__ import annotations

from dataclasses import dataclass

from config.repos import Whitelist, load_whitelist
from config.settings import Settings, load_settings
from worker.repos.mirrors import Mirrors
from worker.tools import build_registry
from worker.tools.registry import ToolRegistry


@dataclass(frozen=True)
class Runtime:
    settings: Settings
    whitelist: Whitelist
    mirrors: Mirrors
    registry: ToolRegistry


_installed: Runtime | None = None


def build_runtime(settings: Settings) -> Runtime:
    whitelist = load_whitelist(settings.resolved_repos_file)
    return Runtime(settings, whitelist, Mirrors(settings, whitelist), build_registry())


def install(runtime: Runtime) -> None:
    global _installed
    _installed = runtime


def current() -> Runtime:
    global _installed
    if _installed is None:
        _installed = build_runtime(load_settings())
    return _installed
