"""Reading the examples out of Markdown documents (the README, docs/): shared by the tests
that run them."""

from __future__ import annotations

import re


def console_examples(text: str) -> list[tuple[str, str]]:
    """``$ command`` lines of every ```console block, each with the output lines shown under it."""
    out = []
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        cmd, lines = None, []
        for line in block.splitlines():
            if line.startswith("$ "):
                if cmd:
                    out.append((cmd, "\n".join(lines)))
                cmd, lines = line[2:], []
            else:
                lines.append(line)
        if cmd:
            out.append((cmd, "\n".join(lines)))
    return out
