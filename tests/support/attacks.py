"""Hypothesis strategies for attacking the tools, shared by the security suite.

`tool_calls(fortress)` makes (tool name, arguments) for any tool of the registry, from its
schema and the names of its parameters; `raw_arguments(fortress)` makes the raw JSON text a
model sends, with type confusion, unknown keys and malformed JSON. Paths are built from the
fortress's own files and escaping links, so a good share of calls reaches something real.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tests.support.fixture_repos import TRAVERSAL_PATHS
from tests.support.fortress import Fortress, app_files, app_links, plant
from worker.tools import build_registry

# A sane profile for CI: reproducible (derandomized), no example database, no deadline (a search
# spawns ripgrep), about 200 examples per property.
FUZZ = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
REGISTRY = build_registry()
LINKS = sorted(app_links(Path("/x")))
FILES = sorted(app_files(plant()))  # every path of the app repo, secret files included

SEGMENTS = [
    *LINKS,
    *(link.rsplit("/", 1)[-1] for link in LINKS if "/" in link),
    "..",
    ".",
    "",
    "...",
    "..hidden",
    "src",
    "app.py",
    "clients.py",
    "long_lines.py",
    "docs",
    "keys.md",
    "big",
    "log.txt",
    "assets",
    "mixed.bin",
    "config",
    "server.pem",
    ".env",
    ".ENV",
    ".env.production",
    ".env.d",
    "database.txt",
    "id_rsa",
    "keys",
    "deploy.key",
    ".npmrc",
    "cloud",
    "credentials.json",
    "nested",
    "deeper",
    ".git",
    ".GIT",
    "HEAD",
    "etc",
    "passwd",
    "NEXTDOOR.txt",
    "outside",
    "CANARY.txt",
    "sibling",
    "notes.txt",
    "internal",
    "snapshots",
    "repos",
    "%2e%2e",
    "..%2f",
    "\uff0e\uff0e",
    "\u2025",
    "..\u2215",
    "~",
    "$HOME",
    "*",
    "?",
    "-rf",
    "--follow",
    "数据.py",
    "with space.md",
    " ",
    "\t",
    "\n",
    "\x00",
    "\ud800",
    "\udcff",
    "é" * 130,
    "x" * 256,
    "C:",
    "\\\\?\\C:",
]
SEPARATORS = ["/", "/", "/", "\\", "//", "/./", "\\/"]
LEADS = ["", "", "", "./", "/", "\\", "~/", "C:\\", "file://", " "]


@st.composite
def hostile_paths(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 12))
    if kind == 0:
        return draw(st.text(max_size=40))
    if kind == 1:
        return draw(st.sampled_from(TRAVERSAL_PATHS))
    if kind == 2:
        return draw(st.sampled_from(["x", "é", "/.."])) * draw(st.integers(300, 2000))
    if kind <= 6:  # a real path of the repo, maybe reached a roundabout way
        real = draw(st.sampled_from(FILES + LINKS))
        lead = draw(st.sampled_from(["", "", "./", "src/../", "dot/", "up/app/", "src/inner_link.py/../"]))
        return lead + (real.upper() if draw(st.integers(0, 9)) == 0 else real)
    parts = draw(st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=6))
    path = draw(st.sampled_from(LEADS))
    for part in parts:
        path += part + draw(st.sampled_from(SEPARATORS))
    return path.rstrip("/\\") if draw(st.booleans()) else path


GLOB_PARTS = [
    "*",
    "**",
    "?",
    "[!a]",
    "{a,b}",
    "[",
    "{",
    "}",
    "!",
    "..",
    ".env*",
    "*.pem",
    "id_rsa",
    "*.key",
    ".npmrc",
    "etc/passwd",
    "/",
    "**/",
    "*.py",
    "src",
    ".git",
    ".git/**",
    "NEXTDOOR*",
    "../*",
    "/etc/*",
    "\\",
    "\x00",
    "\ud800",
    " ",
    "sibling*",
    "outside*",
    "*CANARY*",
    "credentials.*",
    ".ENV",
    "*/.env.d/*",
    "!!",
]


@st.composite
def hostile_globs(draw: st.DrawFn) -> str | None:
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return None
    if kind == 1:
        return draw(st.text(max_size=30))
    if kind == 2:
        return "*" * draw(st.integers(1000, 3000))
    parts = draw(st.lists(st.sampled_from(GLOB_PARTS), min_size=1, max_size=5))
    return draw(st.sampled_from(["", "/"])).join(parts)


REGEXES = [
    "AKIA",
    "ghp_",
    "xox",
    "sk-",
    "sk_live",
    "glpat",
    "AIza",
    "eyJ",
    "PASSWORD",
    "password",
    "PRIVATE KEY",
    "BEGIN",
    "root:",
    "SECRETFILE",
    "CANARY",
    "SIBLING",
    "NEXTDOOR",
    "[A-Za-z0-9+/]{40,}",
    "[A-Za-z0-9_-]{30,}",
    "=",
    ".",
    "(?s).*",
    "(?i)akia",
    "\\x00",
    "(a+)+$",
    "\\p{L}+",
    "^",
    "$",
    "",
    "(",
    "[",
    "\\",
    "(?P<x>",
    "a{99999}",
    "-e",
    "--files",
    "--pre=sh",
    "-L",
    "--follow",
    "(?-u:\\xff)",
    '\\w+\\s*=\\s*"[^"]{20,}"',
    "[^\\n]{250,}",
    "\\.",
    "x{2}|y",
    "\x00",
    "\ud800",
]


def secret_pieces(fortress: Fortress) -> st.SearchStrategy[str]:
    """A regex matching a piece (4-10 characters) of a planted secret or canary: the lines it hits
    must come back redacted, if at all."""
    sensitive = [*fortress.planted.secrets, *fortress.planted.canaries]
    return st.builds(
        lambda text, start, size, fold: ("(?i)" if fold else "") + re.escape(text[start : start + size]),
        st.sampled_from(sensitive),
        st.integers(0, 30),
        st.integers(4, 10),
        st.booleans(),
    )


def hostile_regexes(fortress: Fortress) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(REGEXES),
        secret_pieces(fortress),
        st.text(max_size=20),
        st.builds(lambda a, b: a + "|" + b, st.sampled_from(REGEXES), secret_pieces(fortress)),
    )


NUMBERS = st.one_of(
    st.integers(-5, 40),
    st.integers(1490, 1560),  # around the key block in big/log.txt
    st.integers(),
    st.sampled_from([0, -1, 2**31, 2**63, 10**30, -(10**30), 2999, 3000, 3001, 3025]),
)
REPOS = st.one_of(
    *[st.just("app")] * 6,
    st.sampled_from(["sibling", "APP", "app ", "../app", "", "internal", "\x00", "app/..", "*"]),
    st.text(max_size=12),
)
SYMBOLS = st.one_of(
    st.sampled_from(["retry_job", "Queue", "Queue.retry", "client", "os", "boto3", "AWS_KEY_ID", "KEY", "A"]),
    st.text(max_size=30),
    st.just("x" * 5000),
)


# Refs for the history tools: options, ranges, reflogs, peels, `rev:path` to a secret file.
REFS = st.one_of(
    st.sampled_from(["HEAD", "HEAD~1", "HEAD^", "main", "master", "v1", "abc1234", "0" * 40, "@"]),
    st.sampled_from(
        [
            "--output=/tmp/codebot-pwned",
            "-p",
            "HEAD:.env",
            "HEAD:src/clients.py",
            "HEAD..HEAD",
            "HEAD@{1}",
            ":/retry",
            "HEAD^{tree}",
            "HEAD^{/x}",
            "--all",
            "HEAD -- .env",
            "2024-01-01",
            "3 weeks ago",
            "x" * 300,
        ]
    ),
    st.text(max_size=20),
)


def value_for(name: str, kind: str, fortress: Fortress) -> st.SearchStrategy[Any]:
    """A strategy for one parameter, by its name first and its JSON type second."""
    if name in ("sha", "from", "to", "since", "until"):
        return REFS
    if name == "query":
        return hostile_regexes(fortress)
    if name == "match":
        return st.sampled_from(["message", "diff", "both", "all", ""])
    if name == "path":
        return hostile_paths()
    if name == "glob":
        return hostile_globs()
    if name == "pattern":
        return hostile_regexes(fortress)
    if name == "repo":
        return REPOS
    if name == "symbol":
        return SYMBOLS
    if kind == "integer":
        return NUMBERS
    if kind == "boolean":
        return st.booleans()
    return st.text(max_size=40)


def tool_calls(fortress: Fortress) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    """(tool name, arguments) for any tool of the registry, arguments built from its schema."""

    def for_tool(name: str) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
        properties: dict[str, Any] = REGISTRY.tools[name].parameters["properties"]
        required = set(REGISTRY.tools[name].parameters["required"])
        fields = {
            param: value_for(param, spec["type"], fortress)
            if param in required
            else st.one_of(st.none(), value_for(param, spec["type"], fortress))
            for param, spec in properties.items()
        }
        return st.fixed_dictionaries(fields).map(
            lambda args: (name, {k: v for k, v in args.items() if v is not None})
        )

    return st.sampled_from(REGISTRY.names()).flatmap(for_tool)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def raw_arguments(draw: st.DrawFn, fortress: Fortress) -> tuple[str, str]:
    """(tool name, raw JSON text) with type confusion, unknown keys and malformed JSON."""
    name, arguments = draw(tool_calls(fortress))
    if draw(st.booleans()):
        name = draw(st.sampled_from([*REGISTRY.names(), "read_file ", "READ_FILE", "exec", "", "__init__"]))
    mixed: dict[str, Any] = dict(arguments)
    for key in list(mixed) + draw(
        st.lists(st.sampled_from(["path", "repo", "start_line", "glob"]), max_size=2)
    ):
        if draw(st.integers(0, 3)) == 0:
            mixed[key] = draw(JSON_VALUES)
    if draw(st.integers(0, 5)) == 0:
        mixed[draw(st.sampled_from(["ctx", "self", "settings", "__class__", "kwargs", "x" * 300]))] = 1
    text = json.dumps(mixed, ensure_ascii=draw(st.booleans()), allow_nan=True)
    damage = draw(st.integers(0, 7))
    if damage == 0:
        text = text[: draw(st.integers(0, len(text)))]
    elif damage == 1:
        text = draw(st.sampled_from(["[", "{"])) * draw(st.integers(1, 50_000)) + text
    elif damage == 2:
        text = json.dumps(draw(JSON_VALUES))
    elif damage == 3:
        text = text.replace("}", ', "start_line": NaN, "end_line": -Infinity}', 1)
    return name, text
