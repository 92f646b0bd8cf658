"""Evidence over guesses: what the model did outweighs what the server's numbers suggest, and a
model not asked is told as what was learned and where (worker/agent/model_fit.py).

A proxy or gateway may count only the messages in `usage.prompt_tokens`: too few tokens for
the tool schemas to have been sent, yet the model calls a listed tool. llama.cpp's /props may
say its chat template has no tool support: codebot then sends nothing, and says why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.e2e import Rig, build_rig
from tests.support.model_server import Reply, text, tool_calls, under_counted
from worker.jobs.status_view import status_facts

READ = tool_calls(("read_file", {"repo": "payments", "path": "payments/retry.py"}))
ANSWER = text("It tries 5 times [payments:payments/retry.py#L3].")
NO_TOOLS_TEMPLATE = {
    "build_info": "b1-test",
    "default_generation_settings": {"n_ctx": 8192},
    "chat_template_caps": {"supports_tools": False, "supports_tool_calls": False},
}


def ask(rig: Rig, question: str = "How many times does retry try?") -> tuple[str, dict[str, Any]]:
    return rig.final(rig.ask(question)[1])


def ignored(rig: Rig) -> list[str]:
    endpoints = status_facts(rig.redis, rig.runtime)["model"]["endpoints"]
    return list(next(e for e in endpoints if e["configured"])["ignored"])


def host(rig: Rig) -> str:
    return rig.model.base_url.split("//")[1].split("/")[0]


def counting_only_the_messages(reply: Reply) -> Reply:
    return under_counted(12, reply)  # far fewer tokens than the tool schemas alone


def test_a_listed_tool_called_proves_the_tools_arrived_whatever_the_servers_usage_says(
    tmp_path: Path,
) -> None:
    def model(body: dict[str, Any]) -> Reply:
        return counting_only_the_messages(ANSWER if body["messages"][-1]["role"] == "tool" else READ)

    for rig in build_rig(tmp_path):
        rig.model.set_handler(model)
        assert ask(rig)[0] == "answer"
        kind, fields = ask(rig, "Where does retry give up?")
        assert kind == "answer" and "5 times" in fields["markdown"]  # every later question too
        assert ignored(rig) == []
        assert len(rig.model.requests) == 4


def test_a_model_that_never_calls_a_tool_on_an_under_counting_server_is_told_as_learned_from_usage(
    tmp_path: Path,
) -> None:
    for rig in build_rig(tmp_path):
        rig.model.set_handler(lambda _body: counting_only_the_messages(text("Five, I think.")))
        ask(rig)
        kind, fields = ask(rig, "Where does retry give up?")
        assert kind == "failed" and fields["outcome"] == "not_an_answer"
        said = fields["text"]
        assert (
            f"the model server at {host(rig)} counted fewer prompt tokens than codebot's tool schemas" in said
        )
        assert "never made a usable tool call" not in said
        assert "tools" in ignored(rig)


def test_a_model_not_asked_because_of_its_chat_template_is_told_what_was_learned_and_from_where(
    tmp_path: Path,
) -> None:
    for rig in build_rig(tmp_path, model_options={"props": NO_TOOLS_TEMPLATE}):
        kind, fields = ask(rig)
        assert kind == "failed" and fields["outcome"] == "not_an_answer"
        said = fields["text"]
        assert f"the chat template of the model server at {host(rig)} has no tool support (its /props" in said
        assert "codebot did not ask it" in said and "No code was read" in said
        assert "never made a usable tool call" not in said
        assert rig.model.requests == []
