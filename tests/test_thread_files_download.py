"""An attached file's download over a real socket (worker/conversation/download.py): its end
within the cap, whatever the host does with `Range`, and text told from binary by its bytes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.file_host import ForeignHost
from worker.conversation.download import STREAM_FACTOR, download
from worker.conversation.files import as_text
from worker.conversation.thread import Fetched, FileUnreadable

LOG = "\n".join(f"line {n:05d} ok" for n in range(3000)).encode() + b"\nFATAL: ledger locked\n"


@pytest.fixture
def host() -> Iterator[ForeignHost]:
    served = ForeignHost()
    yield served
    served.close()


def test_a_long_log_is_read_from_its_end_when_the_host_honours_range(host: ForeignHost) -> None:
    fetched = download(host.put("/app.log", LOG), {}, 1024, 10.0, size=len(LOG))
    assert fetched.cut and len(fetched.data) == 1024 and fetched.data.endswith(b"FATAL: ledger locked\n")
    assert host.store.requests[0].headers.get("Range") == "bytes=-1024"


def test_a_host_ignoring_range_still_gives_the_logs_end_and_says_it_was_cut(host: ForeignHost) -> None:
    host.store.ranges = False
    fetched = download(host.put("/app.log", LOG), {}, 8 * 1024, 10.0, size=None)
    assert fetched.cut and len(fetched.data) == 8 * 1024 and fetched.data.endswith(b"FATAL: ledger locked\n")


def test_a_host_sending_far_more_than_asked_is_given_up_as_too_large(host: ForeignHost) -> None:
    host.store.ranges = False
    url = host.put("/huge.log", LOG)
    with pytest.raises(FileUnreadable) as raised:
        download(url, {}, len(LOG) // (STREAM_FACTOR + 1), 10.0, size=None)
    assert raised.value.problem == "too_large"


def test_a_short_file_is_read_whole_and_not_called_cut(host: ForeignHost) -> None:
    fetched = download(host.put("/small.log", b"all of it\n"), {}, 1024, 10.0, size=10)
    assert fetched == Fetched(b"all of it\n", cut=False)


def test_text_is_told_from_binary_by_its_bytes_not_its_name() -> None:
    assert as_text(Fetched("café au lait\n".encode())) == "café au lait\n"
    assert as_text(Fetched("naïve windows log\r\n".encode("cp1252"))) == "naïve windows log\r\n"
    assert as_text(Fetched(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")) is None
    assert as_text(Fetched(bytes(range(1, 32)) * 20)) is None  # control bytes, no NUL: still binary
    assert as_text(Fetched("…é\nnext\n".encode()[1:], cut=True)) == "next\n"  # cut inside a character


def test_the_end_of_a_file_starts_at_a_whole_line_so_a_secret_cut_in_two_shows_no_part() -> None:
    token_tail = "Zq9XZq9XZq9XZq9XZq9X\nINFO retried\n"  # the end of a token line whose start was cut
    assert as_text(Fetched(token_tail.encode(), cut=True)) == "INFO retried\n"
    key_tail = (
        "b3BlbnNzaC1rZXktdjEAAAAA\nAAAAC1rZXktdjEAAAAABG5v\n-----END OPENSSH PRIVATE KEY-----\nINFO up\n"
    )
    assert as_text(Fetched(key_tail.encode(), cut=True)) == "INFO up\n"
    whole = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    assert as_text(Fetched(("x\n" + whole).encode(), cut=True)) == whole  # a block read whole stays
