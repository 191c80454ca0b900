"""A symbol's callers and callees drawn as a small SVG picture: callers on the left, the symbol in
the middle, callees on the right, each box a link to that symbol's own page. Drawn by hand in a
few lines because the picture is three columns of boxes: a layout library would be a dependency
for nothing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

BOX_W, BOX_H, GAP_Y, COL_GAP, PAD = 230, 34, 12, 110, 16
MAX_PER_SIDE = 12  # more than this are summed up in one "+N more" box
MAX_LABEL = 30


@dataclass(frozen=True)
class Node:
    label: str  # what the box says (a qualified name, or a name as written when unresolved)
    detail: str  # its tooltip: path:line and how the edge was resolved
    href: str | None  # its page; None for a name with no definition in the index
    resolution: str = ""  # same-file, import, unique, ambiguous, external, unresolved


def _label(text: str) -> str:
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"


def _labels(texts: Sequence[str]) -> list[str]:
    """Each text cut to MAX_LABEL; where two different texts would read the same cut at the end
    (`test_should_bypass_proxies_wi…` three times), they are cut in the middle instead, keeping
    the ends that tell them apart (`test_should_by…n_registry`)."""
    shown = [_label(t) for t in texts]
    seen: dict[str, set[str]] = {}
    for text, label in zip(texts, shown, strict=True):
        seen.setdefault(label, set()).add(text)
    head = MAX_LABEL // 2 - 1
    tail = MAX_LABEL - head - 1
    return [label if len(seen[label]) == 1 else text[:head] + "…" + text[-tail:] for text, label in zip(texts, shown, strict=True)]


def _column(nodes: Sequence[Node], more_href: str | None) -> list[Node]:
    """At most MAX_PER_SIDE boxes, equal names counted once (a caller calling twice is one box)."""
    unique: dict[str, Node] = {}
    for node in nodes:
        unique.setdefault(node.label + "\0" + (node.href or ""), node)
    kept = list(unique.values())
    if len(kept) > MAX_PER_SIDE:
        rest = len(kept) - (MAX_PER_SIDE - 1)
        kept = kept[: MAX_PER_SIDE - 1] + [Node(f"+{rest} more", f"{rest} more, listed below", more_href)]
    shown = _labels([node.label for node in kept])
    return [Node(label, f"{node.label}: {node.detail}" if label != node.label else node.detail, node.href, node.resolution)
            for node, label in zip(kept, shown, strict=True)]


def call_graph_svg(centre: Node, callers: Sequence[Node], callees: Sequence[Node], more_href: str | None = None) -> str:
    """The picture, as one `<svg>` element (no script, no external reference)."""
    left, right = _column(callers, more_href), _column(callees, more_href)
    rows = max(len(left), len(right), 1)
    height = PAD * 2 + rows * BOX_H + (rows - 1) * GAP_Y
    width = PAD * 2 + 3 * BOX_W + 2 * COL_GAP
    xs = (PAD, PAD + BOX_W + COL_GAP, PAD + 2 * (BOX_W + COL_GAP))

    def ys(count: int) -> list[float]:
        column = count * BOX_H + (count - 1) * GAP_Y
        top = (height - column) / 2
        return [top + i * (BOX_H + GAP_Y) for i in range(count)]

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="callgraph" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="callers and callees of {escape(centre.label)}">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto">'
        '<path d="M0,0 L10,5 L0,10 z" class="arrowhead"/></marker></defs>',
    ]
    (centre_y,) = ys(1)
    for y in ys(len(left)):
        parts.append(_edge(xs[0] + BOX_W, y + BOX_H / 2, xs[1], centre_y + BOX_H / 2))
    for y in ys(len(right)):
        parts.append(_edge(xs[1] + BOX_W, centre_y + BOX_H / 2, xs[2], y + BOX_H / 2))
    parts.append(_box(centre, xs[1], centre_y, "centre"))
    parts += [_box(node, xs[0], y, "caller") for node, y in zip(left, ys(len(left)), strict=True)]
    parts += [_box(node, xs[2], y, "callee") for node, y in zip(right, ys(len(right)), strict=True)]
    if not left:
        parts.append(f'<text class="none" x="{xs[0] + BOX_W / 2}" y="{centre_y + BOX_H / 2 + 5}" text-anchor="middle">no callers</text>')
    if not right:
        parts.append(f'<text class="none" x="{xs[2] + BOX_W / 2}" y="{centre_y + BOX_H / 2 + 5}" text-anchor="middle">no callees</text>')
    parts.append("</svg>")
    return "".join(parts)


def _edge(x1: float, y1: float, x2: float, y2: float) -> str:
    middle = (x1 + x2) / 2
    return (f'<path class="edge" marker-end="url(#arrow)" '
            f'd="M{x1:.0f},{y1:.0f} C{middle:.0f},{y1:.0f} {middle:.0f},{y2:.0f} {x2:.0f},{y2:.0f}"/>')


def _box(node: Node, x: float, y: float, role: str) -> str:
    resolution = f" {node.resolution}" if node.resolution else ""
    body = (
        f'<g class="node {role}{resolution}"><title>{escape(node.detail)}</title>'
        f'<rect x="{x:.0f}" y="{y:.0f}" width="{BOX_W}" height="{BOX_H}" rx="6"/>'
        f'<text x="{x + BOX_W / 2:.0f}" y="{y + BOX_H / 2 + 5:.0f}" text-anchor="middle">{escape(_label(node.label))}</text></g>'
    )
    return f'<a href="{escape(node.href)}">{body}</a>' if node.href else body
