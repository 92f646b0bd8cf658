"""Secrets known by the document they are in, not by their shape: Kubernetes Secret manifests.

A Secret's `data:` values are base64 of anything, and its `stringData:` values are anything:
no regex over a value can tell, only the manifest around it (`kind: Secret`). So in every YAML
document (or JSON object text) that declares `kind: Secret`, each value under `data:` or
`stringData:` is redacted, whatever it looks like, block scalars (`key: |`) included.

Linear: one RE2 pass finds the `kind: Secret` declarations and one the `data:` headers; each
line after a header is looked at once.
"""

from __future__ import annotations

import itertools
from typing import Any

import re2

MARKER = b"[REDACTED:kubernetes-secret]"
_KIND_SECRET = rb"""(?im)^[ \t]*["']?kind["']?[ \t]*:[ \t]*["']?Secret["']?[ \t]*,?[ \t]*$"""
_DOC_START = rb"(?m)^---"
_YAML_DATA = rb"(?m)^([ \t]*)(?:data|stringData)[ \t]*:[ \t]*$"
_JSON_DATA = rb""""(?:data|stringData)"[ \t]*:[ \t]*\{([^{}]*)\}"""
_JSON_VALUE = rb'''"(?:[^"\\\n]|\\.)*"[ \t\r\n]*:[ \t\r\n]*"((?:[^"\\\n]|\\.)*)"'''
_YAML_ENTRY = rb"""(?m)^([ \t]+)(?:["'][^"'\n]{0,253}["']|[\w.-]{1,253})[ \t]*:[ \t]*(.*)$"""


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False
    return options


class SecretBlocks:
    """Finds the values of Kubernetes Secret manifests in a text."""

    keywords = ("secret",)  # what a text must contain (any case) before it is looked at

    def __init__(self) -> None:
        self._kind = re2.compile(_KIND_SECRET, options=_options())
        self._doc = re2.compile(_DOC_START, options=_options())
        self._yaml_data = re2.compile(_YAML_DATA, options=_options())
        self._json_data = re2.compile(_JSON_DATA, options=_options())
        self._json_value = re2.compile(_JSON_VALUE, options=_options())
        self._entry = re2.compile(_YAML_ENTRY, options=_options())

    def spans(self, data: bytes) -> list[tuple[int, int, bytes]]:
        kinds = [m.start() for m in self._kind.finditer(data)]
        if not kinds:
            return []
        documents = self._secret_documents(data, kinds)
        spans: list[tuple[int, int, bytes]] = []
        for start, end in documents:
            spans += self._yaml_values(data, start, end)
            for block in self._json_data.finditer(data, start, end):
                for value in self._json_value.finditer(data, block.start(1), block.end(1)):
                    if value.end(1) > value.start(1):
                        spans.append((value.start(1), value.end(1), MARKER))
        return spans

    def _secret_documents(self, data: bytes, kinds: list[int]) -> list[tuple[int, int]]:
        """The (start, end) of each YAML document (between `---` lines) declaring kind: Secret."""
        bounds = [0, *(m.start() for m in self._doc.finditer(data)), len(data)]
        documents = []
        at = 0
        for start, end in itertools.pairwise(bounds):
            while at < len(kinds) and kinds[at] < start:
                at += 1
            if at < len(kinds) and kinds[at] < end:
                documents.append((start, end))
        return documents

    def _yaml_values(self, data: bytes, start: int, end: int) -> list[tuple[int, int, bytes]]:
        spans = []
        scanned = start  # a `data:` nested in a block already scanned is not scanned again
        for header in self._yaml_data.finditer(data, start, end):
            if header.start() < scanned:
                continue
            indent = header.end(1) - header.start(1)
            line_start = data.find(b"\n", header.end(), end)
            block_indent = -1  # inside a `key: |` block scalar: its lines are all value
            while line_start != -1 and line_start + 1 < end:
                line_start += 1
                line_end = data.find(b"\n", line_start, end)
                line_end = end if line_end == -1 else line_end
                line = data[line_start:line_end]
                depth = len(line) - len(line.lstrip(b" \t"))
                if not line.strip() or line.lstrip().startswith(b"#"):
                    line_start = line_end if line_end < end else -1
                    continue
                if depth <= indent:
                    break
                if block_indent >= 0 and depth > block_indent:
                    spans.append((line_start + depth, line_end, MARKER))
                else:
                    entry = self._entry.match(data, line_start, line_end)
                    block_indent = -1
                    if entry is not None and entry.end(2) > entry.start(2):
                        value = data[entry.start(2) : entry.end(2)].strip()
                        if value[:1] in (b"|", b">"):
                            block_indent = depth
                        elif value:
                            spans.append((entry.start(2), entry.end(2), MARKER))
                line_start = line_end if line_end < end else -1
            scanned = line_start if line_start != -1 else end
        return spans
