"""Every file or section a tracked file points at exists in a clone: Markdown links and their
#anchors (GitHub's heading slugs), paths into the repo's own folders, and "README's X section"."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

from tests.support.this_repo import ROOT

FOLDERS = ("docs", "config", "bench", "deploy", "worker", "bot", "codebot", "tests", "eval", ".ci")
TEXT_SUFFIXES = {".md", ".py", ".toml", ".yml", ".yaml", ".example", ".txt", ".cfg", ".sh", ".html", ".j2"}
TEXT_NAMES = {"Dockerfile", "Procfile", "run", ".env.example", ".dockerignore"}
# the repos and texts tests feed in, with the paths of those repos; this file's deliberately dangling probes
SKIPPED = ("tests/fixtures/", "tests/test_references.py")
MARKDOWN_LINK = re.compile(r"\[[^\]\n]*\]\(([^()\s]+)\)")
# a path into one of the repo's own folders: backticked, or ending in a file's extension
IN_BACKTICKS = re.compile(rf"`((?:{'|'.join(map(re.escape, FOLDERS))})/[^`\s]*)`")
WITH_EXTENSION = re.compile(
    rf"(?<![\w./-])((?:{'|'.join(map(re.escape, FOLDERS))})/[\w./-]*\w\.(?:md|py|toml|ya?ml|json|jsonl|sh))\b"
)
OUTSIDE = re.compile(r"(?<![\w./-])((?:\.\./)+[\w-][\w./-]*\.\w+)")
# README "Configuration", README's "Slack" section, docs/models.md "Compatibility matrix"
SECTION = re.compile(r"\b(README(?:\.md)?|(?:docs|bench)/[\w.-]+\.md)(?:'s)?,? [\"“]([^\"”\n]{2,60})[\"”]")


def tracked_text_files() -> list[Path]:
    names = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True, check=True
    ).stdout.split()
    return [
        ROOT / name
        for name in names
        if not name.startswith(SKIPPED)
        and (Path(name).suffix in TEXT_SUFFIXES or Path(name).name in TEXT_NAMES)
        and (ROOT / name).is_file()
    ]


def github_slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: the rendered text, lower case, punctuation dropped,
    spaces as hyphens."""
    shown = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    shown = re.sub(r"[`*]|(?<!\w)_|_(?!\w)|<[^>]+>", "", shown).strip().lower()  # not snake_case's _
    return re.sub(r"[^\w\- ]", "", shown).replace(" ", "-")


@cache
def headings(path: Path) -> tuple[list[str], set[str]]:
    """(section titles, anchors) of a Markdown file: its headings, and the bold words that open
    a paragraph or a list item ("**Streaming.** Answers use …"); repeated slugs get -1, -2 as
    on GitHub."""
    titles, anchors, seen = [], set(), {}
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        in_code = in_code != line.lstrip().startswith("```")
        heading = None if in_code else re.match(r"#{1,6} +(.+?) *#*$", line)
        if heading:
            slug = github_slug(heading.group(1))
            anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
            seen[slug] = seen.get(slug, 0) + 1
        if not in_code:  # an explicit anchor (GitHub keeps `<a id>` and scrolls to it)
            anchors.update(re.findall(r'<a id="([^"]+)"></a>', line))
        lead = None if in_code else re.match(r"\s*(?:[-*] +)?(?:<a id=\"[^\"]+\"></a>)?\*\*([^*]+)\*\*", line)
        if heading or lead:
            titles.append(re.sub(r"[`*]", "", (heading or lead).group(1)).lower())  # type: ignore[union-attr]
    return titles, anchors


def dangling_in(path: Path, text: str | None = None) -> list[str]:
    """What `path` (or `text`, as if it were in `path`) points at that a clone lacks."""
    text = path.read_text(encoding="utf-8", errors="replace") if text is None else text
    where = path.relative_to(ROOT)
    found = []
    if path.suffix == ".md":
        for target in MARKDOWN_LINK.findall(text):
            target = target.removeprefix("<").removesuffix(">")  # CommonMark's [x](<url>) form
            if not re.match(r"[a-z][a-z0-9+.-]*:", target) and "…" not in target:  # not https:, mailto:
                file, _, anchor = target.partition("#")
                linked = (path.parent / file).resolve() if file else path
                if not linked.exists() or ROOT not in (linked, *linked.parents):
                    found.append(f"{where}: link to {target}: no such file")
                elif anchor and linked.suffix == ".md" and anchor not in headings(linked)[1]:
                    found.append(f"{where}: link to {target}: no such section")
    # tests name the files of the repos they build, not files of this one
    mentions = (
        set() if where.parts[0] == "tests" else {*IN_BACKTICKS.findall(text), *WITH_EXTENSION.findall(text)}
    )
    for mention in mentions:
        named = re.split(r"[#:]|\.\.\.|…|\*|<|\{|\[", mention)[0].rstrip(".,")
        as_module = re.sub(r"\.\w+$", ".py", named)  # tests/support/fixture_repos.make_repo
        if named == mention.rstrip(".,") and not (ROOT / named).exists() and not (ROOT / as_module).exists():
            found.append(f"{where}: names {mention}: no such file in a clone")
    for mention in set() if where.parts[0] == "tests" else OUTSIDE.findall(text):
        named = (path.parent / mention).resolve()
        if not named.is_relative_to(ROOT) or not named.exists():
            found.append(f"{where}: names {mention}: outside the repo, not in a clone")
    for document, section in SECTION.findall(text):
        markdown = ROOT / ("README.md" if document.startswith("README") else document)
        titles = headings(markdown)[0] if markdown.exists() else []
        if not any(title.startswith(section.lower()) for title in titles):
            found.append(f'{where}: points at {document} "{section}": no such section')
    return found


def test_no_tracked_file_points_at_a_file_or_section_a_clone_does_not_have() -> None:
    # first, that each kind of dangling pointer is found (a page of docs/ holding these lines)
    probe = (
        "[a](install.md#no-such-heading) `docs/nowhere.md` see ../shared/CONTRACT.md, "
        'README "No such part"; [b](models.md#compatibility-matrix) `docs/models.md` README "Documentation"\n'
    )
    assert sorted(line.split(": ", 1)[1] for line in dangling_in(ROOT / "docs" / "probe.md", probe)) == [
        "link to install.md#no-such-heading: no such section",
        "names ../shared/CONTRACT.md: outside the repo, not in a clone",
        "names docs/nowhere.md: no such file in a clone",
        'points at README "No such part": no such section',
    ]
    dangling = [line for path in tracked_text_files() for line in dangling_in(path)]
    assert dangling == []
