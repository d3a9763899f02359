"""The fenced code blocks of a README, for the test that runs every one of
them (tests/test_readme.py) and the benchmark that runs the quickstart's
consume loop (bench/bench_readme.py).

It only reads text: it never runs anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"

_FENCE = re.compile(r"^```([a-z]*)\n(.*?)^```\n", re.M | re.S)


@dataclass(frozen=True)
class Block:
    """One fenced block: its language tag, its text, and the ``text`` block that
    follows it directly (its expected output), if any."""

    lang: str
    code: str
    output: str | None
    line: int


def blocks(path: Path = README) -> list[Block]:
    """Returns the code blocks of ``path`` (``text`` blocks ride along as the
    output of the block before them)."""
    src = path.read_text()
    found = [(m.group(1), m.group(2), m.start(), m.end()) for m in _FENCE.finditer(src)]
    out: list[Block] = []
    for i, (lang, code, start, end) in enumerate(found):
        if lang == "text":
            continue
        output = None
        if i + 1 < len(found) and found[i + 1][0] == "text":
            between = src[end : found[i + 1][2]]
            if "```" not in between:
                output = found[i + 1][1]
        out.append(Block(lang, code, output, src.count("\n", 0, start) + 1))
    return out
