"""Where the ripgrep binary is: shared by the search tool and the symbol index (which lists
the same files search sees), below both of them in the layers."""

from __future__ import annotations

import functools
import os
import shutil
import sys
from pathlib import Path

RIPGREP_MISSING = (
    "search is unavailable: the ripgrep binary (rg) is not installed on this worker "
    "— install the 'ripgrep' Python package; meanwhile use list_files and read_file"
)


class RipgrepMissing(RuntimeError):
    """No `rg` beside this Python nor on PATH."""


@functools.lru_cache(maxsize=1)
def find_ripgrep() -> str:
    """The `rg` of the `ripgrep` wheel next to this Python, else one on PATH."""
    beside = Path(sys.executable).parent / "rg"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("rg")
    if found:
        return found
    raise RipgrepMissing(RIPGREP_MISSING)
