"""Reading ``cuobjdump -sass`` output (what ptxas emitted for a kernel)."""

from __future__ import annotations

import re


def parse_sass(text: str) -> dict[str, list[tuple[str, str]]]:
    """cuobjdump -sass output -> {function: [(opcode, operands)]} in program order."""
    funcs: dict[str, list[tuple[str, str]]] = {}
    cur = None
    for line in text.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            cur = m.group(1)
            funcs[cur] = []
            continue
        m = re.search(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)([^;]*);", line)
        if cur is not None and m:
            funcs[cur].append((m.group(1), m.group(2).strip()))
    return funcs
