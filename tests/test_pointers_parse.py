"""Links and stack-trace frames found in what someone wrote (worker/pointers/parse.py): pure parsing."""

from __future__ import annotations

import pytest

from worker.pointers.parse import (
    BLOB,
    COMMIT,
    COMPARE,
    MAX_FOUND,
    LinkTarget,
    find_commits,
    find_frames,
    find_urls,
    parse_link,
    ranked_frames,
)

SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(
    ("url", "web", "forge", "expected"),
    [
        (
            f"https://github.com/acme/pay/blob/{SHA}/src/retry.py#L40-L60",
            "https://github.com/acme/pay",
            "github",
            LinkTarget(BLOB, SHA, "src/retry.py", 40, 60),
        ),
        (
            "https://github.com/acme/pay/blob/main/src/retry.py#L40C5-L44C9",
            "https://github.com/acme/pay",
            "github",
            LinkTarget(BLOB, "main", "src/retry.py", 40, 44),
        ),
        (
            "https://github.com/acme/pay/blob/main/src/retry.py#L40",
            "https://github.com/acme/pay",
            "github",
            LinkTarget(BLOB, "main", "src/retry.py", 40, 40),
        ),
        (
            f"https://gitlab.com/acme/pay/-/blob/{SHA}/src/retry.py#L40-60",
            "https://gitlab.com/acme/pay",
            "gitlab",
            LinkTarget(BLOB, SHA, "src/retry.py", 40, 60),
        ),
        (
            f"https://codeberg.org/acme/pay/src/commit/{SHA}/src/retry.py#L40-L60",
            "https://codeberg.org/acme/pay",
            "forgejo",
            LinkTarget(BLOB, SHA, "src/retry.py", 40, 60),
        ),
        (
            "https://gitea.acme.dev/acme/pay/src/branch/main/src/retry.py#L7",
            "https://gitea.acme.dev/acme/pay",
            "gitea",
            LinkTarget(BLOB, "main", "src/retry.py", 7, 7),
        ),
        (
            f"https://bitbucket.org/acme/pay/src/{SHA}/src/retry.py#lines-40:60",
            "https://bitbucket.org/acme/pay",
            "bitbucket",
            LinkTarget(BLOB, SHA, "src/retry.py", 40, 60),
        ),
        (
            f"https://git.acme.dev/projects/PAY/repos/pay/browse/src/retry.py?at={SHA}#40-60",
            "https://git.acme.dev/projects/PAY/repos/pay",
            "bitbucket",
            LinkTarget(BLOB, SHA, "src/retry.py", 40, 60),
        ),
    ],
)
def test_a_link_to_lines_resolves_in_each_forges_shape(
    url: str, web: str, forge: str, expected: LinkTarget
) -> None:
    assert parse_link(url, web, forge) == expected


@pytest.mark.parametrize(
    ("url", "web", "forge"),
    [
        (f"https://github.com/acme/pay/commit/{SHA}", "https://github.com/acme/pay", "github"),
        (f"https://gitlab.com/acme/pay/-/commit/{SHA}", "https://gitlab.com/acme/pay", "gitlab"),
        (f"https://bitbucket.org/acme/pay/commits/{SHA}", "https://bitbucket.org/acme/pay", "bitbucket"),
        (f"https://codeberg.org/acme/pay/commit/{SHA}", "https://codeberg.org/acme/pay", "forgejo"),
    ],
)
def test_a_commit_link_resolves_to_its_sha(url: str, web: str, forge: str) -> None:
    assert parse_link(url, web, forge) == LinkTarget(COMMIT, SHA)


def test_compare_links_resolve_to_both_sides() -> None:
    github = parse_link(
        "https://github.com/acme/pay/compare/v1.2...main", "https://github.com/acme/pay", "github"
    )
    gitlab = parse_link("https://gitlab.com/a/p/-/compare/v1.2...main", "https://gitlab.com/a/p", "gitlab")
    cloud = parse_link(
        "https://bitbucket.org/a/p/branches/compare/main%0Dv1.2", "https://bitbucket.org/a/p", "bitbucket"
    )
    server = parse_link(
        "https://git.acme.dev/projects/P/repos/p/compare/diff?sourceBranch=main&targetBranch=v1.2",
        "https://git.acme.dev/projects/P/repos/p",
        "bitbucket",
    )
    assert github == gitlab == LinkTarget(COMPARE, ref="main", base="v1.2")
    assert cloud == LinkTarget(COMPARE, ref="v1.2", base="main")
    assert server == LinkTarget(COMPARE, ref="main", base="v1.2")


def test_a_branch_name_with_slashes_is_split_off_the_path_when_it_is_the_repos_branch() -> None:
    url = "https://github.com/acme/pay/blob/release/2.0/src/retry.py#L3"
    assert parse_link(url, "https://github.com/acme/pay", "github", "release/2.0") == LinkTarget(
        BLOB, "release/2.0", "src/retry.py", 3, 3
    )


def test_links_to_other_hosts_other_repos_and_lookalike_prefixes_resolve_to_nothing() -> None:
    web = "https://github.com/acme/pay"
    for url in (
        f"https://evil.example/acme/pay/blob/{SHA}/a.py#L1",
        f"https://github.com/acme/billing/blob/{SHA}/a.py#L1",
        f"https://github.com/acme/payments/blob/{SHA}/a.py#L1",  # "pay" is a prefix of "payments"
        f"https://github.com.evil.example/acme/pay/blob/{SHA}/a.py#L1",
        "https://github.com/acme/pay/issues/12",
        f"https://github.com:notaport/acme/pay/blob/{SHA}/a.py#L1",
    ):
        assert parse_link(url, web, "github") is None, url


def test_a_link_whose_path_climbs_out_with_dot_dot_resolves_to_nothing() -> None:
    web = "https://github.com/acme/pay"
    assert parse_link(f"{web}/blob/{SHA}/src/../../etc/passwd#L1", web, "github") is None
    assert parse_link(f"{web}/blob/{SHA}/src/%2e%2e/%2e%2e/etc/passwd#L1", web, "github") is None


def test_urls_are_found_in_prose_and_markdown_without_their_punctuation() -> None:
    text = f"see <https://github.com/a/b/blob/{SHA}/x.py#L3>, and (https://github.com/a/b/commit/{SHA})."
    assert find_urls(text) == [
        f"https://github.com/a/b/blob/{SHA}/x.py#L3",
        f"https://github.com/a/b/commit/{SHA}",
    ]


@pytest.mark.parametrize(
    ("line", "path", "number", "symbol"),
    [
        ('  File "/srv/app/payments/retry.py", line 41, in run', "/srv/app/payments/retry.py", 41, "run"),
        (
            "\tat com.acme.pay.Retry.run(Retry.java:88)",
            "com/acme/pay/Retry.java",
            88,
            "com.acme.pay.Retry.run",
        ),
        (
            "\tat com.acme.pay.RetryKt$run$1.invoke(Retry.kt:12)",
            "com/acme/pay/Retry.kt",
            12,
            "com.acme.pay.RetryKt$run$1.invoke",
        ),
        ("    at run (/app/src/retry.ts:41:7)", "/app/src/retry.ts", 41, "run"),
        ("    at /app/src/retry.js:41:7", "/app/src/retry.js", 41, ""),
        ("\t/go/src/app/retry.go:41 +0x1d", "/go/src/app/retry.go", 41, ""),
        ("app/models/retry.rb:41:in 'run'", "app/models/retry.rb", 41, "run"),
        ("app/models/retry.rb:41:in `block in run'", "app/models/retry.rb", 41, "block in run"),
        ("             at src/retry.rs:41:7", "src/retry.rs", 41, ""),
        ("thread 'main' panicked at src/retry.rs:41:7:", "src/retry.rs", 41, ""),
        ("   at Acme.Retry.Run() in /src/Retry.cs:line 41", "/src/Retry.cs", 41, "Acme.Retry.Run"),
        ("#0 /var/www/src/Retry.php(41): Acme\\Retry->run()", "/var/www/src/Retry.php", 41, ""),
        ('  File "C:\\app\\payments\\retry.py", line 9, in run', "/app/payments/retry.py", 9, "run"),
    ],
)
def test_each_languages_frame_gives_its_path_line_and_symbol(
    line: str, path: str, number: int, symbol: str
) -> None:
    [frame] = find_frames(f"Traceback:\n{line}\nError: boom")
    assert (frame.path, frame.line, frame.symbol) == (path, number, symbol)


def test_library_frames_rank_after_the_applications_and_duplicates_go() -> None:
    trace = (
        'File "/usr/lib/python3.11/site-packages/requests/api.py", line 59, in get\n'
        'File "/srv/app/payments/retry.py", line 41, in run\n'
        'File "/srv/app/payments/retry.py", line 41, in run\n'
        "at node_modules/express/lib/router.js:12:3\n"
        "at java.base/java.lang.Thread.run(Thread.java:833)\n"
        'File "/srv/app/payments/api.py", line 7, in handle\n'
    )
    frames = find_frames(trace)
    assert len(frames) == 5
    ranked = ranked_frames(frames, limit=3)
    assert [f.path for f in ranked] == [
        "/srv/app/payments/retry.py",
        "/srv/app/payments/api.py",
        "/usr/lib/python3.11/site-packages/requests/api.py",
    ]


def test_ten_thousand_frames_and_a_megabyte_line_give_a_bounded_list() -> None:
    """Bounded patterns on cut lines: a hostile text costs linear time (the suite's timeout is the
    backstop; no wall-clock bound here)."""
    trace = "".join(f'  File "/srv/app/mod{i}.py", line {i + 1}, in f\n' for i in range(10_000))
    hostile = "at (" + "a" * 1_000_000 + "\n" + "https://github.com/" + "x/" * 300_000 + "\n"
    frames = find_frames(trace + hostile)
    urls = find_urls(hostile + "at at at " * 100_000)
    assert len(frames) == MAX_FOUND
    assert frames[0].path == "/srv/app/mod0.py"
    assert len(urls) <= 1


def test_commit_shas_are_found_but_plain_words_and_addresses_are_not() -> None:
    text = f"deployed {SHA[:12]} (built from 1a2b3c4d); faulted at 0x7f3a2b1c4d5e after deadbeef and 12345678"
    assert find_commits(text) == [SHA[:12], "1a2b3c4d"]
