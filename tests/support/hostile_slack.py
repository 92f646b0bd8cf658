"""The real Slack adapter and worker serving the fortress: a hostile `app` repo open to every
channel, and an `internal` repo allowed only in one Slack channel (and one Discord channel).

    for rig in build_hostile_slack_rig(tmp_path):   # a pytest fixture
        rig.mention("what does INJECTION.md say?")   # in channel C1, signed, over HTTP
        rig.settle(); rig.work()
        rig.leaks_in_slack()                          # forbidden strings in anything Slack got

Both repos are cloned and snapshotted by the real mirrors; the canaries are planted next to the
app snapshot where its escaping links land. `forbidden` adds everything of `internal` (content,
file names, description) to the fortress's secrets and canaries: none of it may reach C1.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codebot.wiring import build_runtime
from tests.support.fixture_repos import make_repo
from tests.support.fortress import Fortress, LeakFinder, app_files, app_links, plant, plant_outside, token
from tests.support.model_server import ScriptedModel
from tests.support.slack_api import SlackAPI
from tests.support.slack_rig import SECRET_CHANNEL, SlackRig, rig_settings, start_adapter
from worker.ops.redis_connection import stop_embedded_server

DISCORD_SECRET_CHANNEL = "999000111222333444"  # the Discord channel `internal` is allowed in
ADMIN = "UADMIN"


@dataclass(frozen=True)
class Internal:
    """What only SECRET_CHANNEL may learn about the `internal` repo."""

    canary: str  # its NOTES.md
    module: str  # a file name
    description: str

    @property
    def strings(self) -> list[str]:
        return [self.canary, self.module, self.description]


INTERNAL = Internal(
    canary="INTERNAL-CANARY-" + token(501, 16),
    module="launch_plans_" + token(502, 10),
    description="INTERNAL-DESCRIPTION-" + token(503, 12),
)


@dataclass
class HostileSlackRig(SlackRig):
    fortress: Fortress
    finder: LeakFinder

    def slack_texts(self) -> list[str]:
        """Every text Slack was sent: messages, updates, ephemerals, command responses."""
        return [json.dumps(call.body, ensure_ascii=False) for call in self.api.calls]

    def leaks_in_slack(self) -> list[str]:
        return [found for text in self.slack_texts() for found in self.finder(text)]

    def leaks_to_model(self) -> list[str]:
        return self.finder(self.model.all_text_sent())


def internal_repo(path: Path) -> None:
    make_repo(
        path,
        {
            "NOTES.md": f"# Internal\n\n{INTERNAL.canary}\n",
            f"src/{INTERNAL.module}.py": "def launch():\n    return 'secret plans'\n",
        },
    )


def build_hostile_slack_rig(tmp: Path, **overrides: Any) -> Iterator[HostileSlackRig]:
    planted = plant(seed=7)
    base = tmp / "fortress"
    (base / "outside").mkdir(parents=True)
    (base / "outside" / "CANARY.txt").write_text(planted.outside + "\n", encoding="utf-8")
    make_repo(base / "app-src", app_files(planted), app_links(base))
    internal_repo(base / "internal-src")
    repos_file = tmp / "repos.toml"
    repos_file.write_text(
        f'[[repo]]\nname = "app"\nurl = "{base / "app-src"}"\n'
        'web_url = "https://github.com/acme/app"\ndescription = "a fortress under attack"\n\n'
        f'[[repo]]\nname = "internal"\nurl = "{base / "internal-src"}"\n'
        f'description = "{INTERNAL.description}"\n'
        f'channels = ["slack:{SECRET_CHANNEL}", "discord:{DISCORD_SECRET_CHANNEL}"]\n',
        encoding="utf-8",
    )
    api, model = SlackAPI(), ScriptedModel()
    admins = {"admins": f"slack:{ADMIN},discord:42"}
    settings = rig_settings(api, model, base / "data", repos_file, **{**admins, **overrides})
    runtime = build_runtime(settings)
    for name in ("app", "internal"):
        assert runtime.mirrors.sync(name).ok, name
    snapshot = runtime.mirrors.current("app")
    assert snapshot is not None
    plant_outside(snapshot.root, planted)
    fortress = Fortress(
        base=base, snapshots={"app": snapshot}, planted=planted, extra_forbidden=INTERNAL.strings
    )
    redis, executor, server = start_adapter(settings, runtime)
    try:
        yield HostileSlackRig(
            settings,
            runtime,
            redis,
            api,
            model,
            server,
            executor,
            snapshot.sha,
            itertools.count(1),
            fortress,
            LeakFinder(fortress),
        )
    finally:
        server.close()
        executor.shutdown(wait=True)
        api.close()
        model.close()
        stop_embedded_server(settings)
