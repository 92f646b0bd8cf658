"""What tests compare of an answer as posted."""

from __future__ import annotations

import re

# the closing lines naming the commits read (worker/jobs/read_footer.py): tested on their own in
# tests/test_answer_freshness.py and tests/test_read_footer.py
_READ_FOOTER = re.compile(r"\n\n_Read `[^\n]*\._(\n_A refresh [^\n]*\._)?$")


def body(text: str) -> str:
    """An answer as posted, without its footer of the commits it read and their age."""
    return _READ_FOOTER.sub("", text)
