"""What a worker process builds once in main() and every job it runs uses.

RQ imports a job's function by its dotted path, so the job cannot be handed its collaborators
as arguments. The composition root (codebot/wiring.py, called by `codebot worker`) builds the
Runtime with the chat platforms' sinks and admin notifiers in typed registries, and installs
it here before any job runs (forked work horses inherit it). The core never imports the
adapters: a platform it has no sink for is a configuration error, said in the log.

A job run by a plain `rq worker` (no `codebot worker`) finds no runtime and fails with a clear
message: without the composition root it could not post to Slack or Discord anyway
(docs/operations.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from config.repos import Whitelist, load_whitelist
from config.settings import Settings
from worker.conversation.chain import ReplyChainReader
from worker.conversation.thread import ThreadReader
from worker.jobs.question import Platform
from worker.jobs.sink import Notifier, SinkFactory
from worker.repos.cleanup import BackgroundCleaner
from worker.repos.mirrors import Mirrors
from worker.tools import build_registry
from worker.tools.registry import ToolRegistry

NOT_INSTALLED = (
    "no codebot runtime in this process: run questions with `codebot worker` "
    "(a plain `rq worker` has no Slack or Discord sink to answer with)"
)


@dataclass(frozen=True)
class Runtime:
    settings: Settings
    whitelist: Whitelist
    mirrors: Mirrors
    registry: ToolRegistry
    # platform -> how a job answers there; "console" needs none (worker.jobs.sink.ConsoleSink)
    sinks: Mapping[Platform, SinkFactory] = field(default_factory=dict)
    # platform -> how an admin is told privately how their command went
    notifiers: Mapping[Platform, Notifier] = field(default_factory=dict)
    # platform -> how a job reads the earlier messages of the thread a question was asked in
    threads: Mapping[Platform, ThreadReader] = field(default_factory=dict)
    # platform -> how a job reads the chain of messages a question replied to outside a thread
    reply_chains: Mapping[Platform, ReplyChainReader] = field(default_factory=dict)


_installed: Runtime | None = None


def build_runtime(
    settings: Settings,
    sinks: Mapping[Platform, SinkFactory] | None = None,
    notifiers: Mapping[Platform, Notifier] | None = None,
    threads: Mapping[Platform, ThreadReader] | None = None,
    reply_chains: Mapping[Platform, ReplyChainReader] | None = None,
) -> Runtime:
    whitelist = load_whitelist(settings.resolved_repos_file)
    return Runtime(
        settings,
        whitelist,
        # an old snapshot's files and unused blobs are deleted after a refresh returns
        Mirrors(settings, whitelist, BackgroundCleaner()),
        build_registry(),
        sinks=dict(sinks or {}),
        notifiers=dict(notifiers or {}),
        threads=dict(threads or {}),
        reply_chains=dict(reply_chains or {}),
    )


def install(runtime: Runtime) -> None:
    global _installed
    _installed = runtime


class RuntimeNotInstalled(RuntimeError):
    """A job ran in a process that `codebot worker` did not prepare."""


def current() -> Runtime:
    if _installed is None:
        raise RuntimeNotInstalled(NOT_INSTALLED)
    return _installed
