"""Figures like the PTX ISA's: a grid of labelled cells, coloured by lane (SVG, no dependencies).

The generic part is :class:`Cell`, :class:`Panel` and :func:`svg` - a titled grid of
cells, each with one to three short text lines, a fill colour and a hover title.  Several
panels stack vertically in one figure (e.g. the four products of m8n8k4, or the metadata
words of sparse mma).  :func:`layout_svg` draws a fragment layout with it: cell (row,
col) shows ``T<lane>`` and the element name ``a<i>``, coloured by lane.

    >>> from formal.cli.draw import Cell, Panel, svg, lane_color
    >>> p = Panel("example", 1, 2, {(0, 0): Cell(["T0", "a0"], lane_color(0))})
    >>> svg([p]).startswith("<svg")
    True
"""

from __future__ import annotations

import colorsys
from dataclasses import dataclass, field
from typing import Mapping, Sequence
from xml.sax.saxutils import escape

EMPTY_FILL = "#e6e6e6"
CLASH_STROKE = "#d00000"


def lane_color(lane: int, lanes: int = 32) -> str:
    """A light colour per lane: hue by lane % 8 (the eight groups of four), shade by lane // 8."""
    h = ((lane % 8) * 45 + (lane // 8) * 11) % 360 / 360.0
    light = (0.86, 0.78, 0.70, 0.92)[(lane // 8) % 4]
    r, g, b = colorsys.hls_to_rgb(h, light, 0.65)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


@dataclass
class Cell:
    lines: list[str]
    fill: str = "#ffffff"
    title: str = ""                  # hover text
    stroke: str | None = None        # outline colour (e.g. a collision)


@dataclass
class Panel:
    title: str
    nrows: int
    ncols: int
    cells: Mapping[tuple[int, int], Cell]
    row_labels: Sequence[str] | None = None
    col_labels: Sequence[str] | None = None
    row_axis: str = "row"
    col_axis: str = "col"
    notes: list[str] = field(default_factory=list)


def _cell_size(panels: Sequence[Panel], font: int) -> tuple[int, int]:
    longest = max((len(s) for p in panels for c in p.cells.values() for s in c.lines), default=2)
    nlines = max((len(c.lines) for p in panels for c in p.cells.values()), default=1)
    w = max(26, int(longest * font * 0.62) + 8)
    h = max(18, nlines * (font + 2) + 6)
    return w, h


def svg(panels: Sequence[Panel], title: str = "", font: int = 10, caption: str = "") -> str:
    """One SVG figure: ``title`` on top, the panels stacked vertically, ``caption`` below."""
    cw, ch = _cell_size(panels, font)
    margin, label_w, label_h, title_h = 10, 34, 16, 22
    parts: list[str] = []
    y = margin
    width = 0
    if title:
        parts.append(f'<text x="{margin}" y="{y + 14}" font-size="{font + 4}" font-weight="bold">{escape(title)}</text>')
        y += title_h + 4
    for p in panels:
        if p.title:
            parts.append(f'<text x="{margin}" y="{y + 12}" font-size="{font + 2}">{escape(p.title)}</text>')
            y += title_h
        x0, y0 = margin + label_w, y + label_h
        for c in range(p.ncols):
            lab = p.col_labels[c] if p.col_labels else str(c)
            parts.append(f'<text x="{x0 + c * cw + cw / 2:.1f}" y="{y + 11}" font-size="{font - 1}" '
                         f'text-anchor="middle" fill="#555">{escape(lab)}</text>')
        for r in range(p.nrows):
            lab = p.row_labels[r] if p.row_labels else str(r)
            parts.append(f'<text x="{x0 - 4}" y="{y0 + r * ch + ch / 2 + font / 2 - 1:.1f}" font-size="{font - 1}" '
                         f'text-anchor="end" fill="#555">{escape(lab)}</text>')
        for r in range(p.nrows):
            for c in range(p.ncols):
                cell = p.cells.get((r, c))
                x, yy = x0 + c * cw, y0 + r * ch
                fill = cell.fill if cell else EMPTY_FILL
                stroke = (cell.stroke if cell and cell.stroke else "#888")
                sw = 2 if cell and cell.stroke else 0.5
                tip = f"<title>{escape(cell.title)}</title>" if cell and cell.title else ""
                parts.append(f'<g><rect x="{x}" y="{yy}" width="{cw}" height="{ch}" fill="{fill}" stroke="{stroke}" '
                             f'stroke-width="{sw}"/>{tip}')
                if cell:
                    n = len(cell.lines)
                    for k, line in enumerate(cell.lines):
                        ty = yy + ch / 2 + (k - (n - 1) / 2) * (font + 2) + font / 2 - 1
                        parts.append(f'<text x="{x + cw / 2:.1f}" y="{ty:.1f}" font-size="{font}" '
                                     f'text-anchor="middle">{escape(line)}</text>')
                parts.append("</g>")
        width = max(width, x0 + p.ncols * cw + margin)
        y = y0 + p.nrows * ch + 8
        for note in p.notes:
            parts.append(f'<text x="{margin}" y="{y + 10}" font-size="{font - 1}" fill="#333">{escape(note)}</text>')
            y += font + 4
        y += 10
    if caption:
        parts.append(f'<text x="{margin}" y="{y + 10}" font-size="{font - 1}" fill="#333">{escape(caption)}</text>')
        y += font + 8
    texts = [(title, font + 4)] + [(caption, font - 1)] + [(n, font - 1) for p in panels for n in p.notes] + \
        [(p.title, font + 2) for p in panels]
    width = max([width, 420] + [int(2 * margin + len(t) * f * 0.62) for t, f in texts if t])
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y + margin}" '
            f'viewBox="0 0 {width} {y + margin}" font-family="DejaVu Sans Mono, monospace">\n'
            f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(parts) + "\n</svg>\n")


def layout_panels(lay, operand: str | None = None) -> list[Panel]:
    """One panel per product: cell (row, col) labelled T<lane> / <op><i>, coloured by lane."""
    from ..layout import operand_letter

    letter = operand_letter(operand or lay.operand)
    e = lay.enumerate()
    panels = []
    for p in range(lay.products):
        cells: dict[tuple[int, int], Cell] = {}
        for k in range(e["lane"].size):
            if e["product"][k] != p:
                continue
            r, c = int(e["row"][k]), int(e["col"][k])
            if not (0 <= r < lay.rows and 0 <= c < lay.cols):
                continue
            # a warpgroup layout is labelled by thread (T0..T127) as the wgmma figures are
            lane, i = int(e.get("thread", e["lane"])[k]), int(e["i"][k])
            lo = int(e["bit_lo"][k])
            who = f"warp {int(e['warp'][k])} lane {int(e['lane'][k])}" if "warp" in e else f"lane {lane}"
            tip = (f"({r}, {c}): {who}, register {int(e['reg'][k])}, element {int(e['elem'][k])} "
                   f"= {letter}{i}, bits [{lo + lay.value_bits - 1}:{lo}]")
            if (r, c) in cells:      # a collision: keep both labels, outline in red
                old = cells[(r, c)]
                cells[(r, c)] = Cell(old.lines + [f"T{lane}:{letter}{i}"], old.fill, old.title + "\n" + tip,
                                     CLASH_STROKE)
            else:
                cells[(r, c)] = Cell([f"T{lane}", f"{letter}{i}"], lane_color(lane), tip)
        title = f"product {p} (MMA computation {p + 1})" if lay.products > 1 else ""
        panels.append(Panel(title, lay.rows, lay.cols, cells))
    return panels


def layout_svg(lay, operand: str | None = None, title: str = "", caption: str = "") -> str:
    return svg(layout_panels(lay, operand), title=title, caption=caption)
