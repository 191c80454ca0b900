"""A self-contained HTML page for an eval run: the table, ranks per question, top-k hit curves.

Plain SVG written here rather than matplotlib: a page with no external assets, and no plotting
dependency in the default install.
"""

from __future__ import annotations

import html
import math

from codewhere.evaluate import EvalResult

COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
W, H, PAD = 760, 320, 48


def _rank_plot(result: EvalResult, depth: int) -> str:
    """One row per question, a dot per method at its rank on a log axis; misses at the right edge."""
    queries = result.query_file.queries
    height = PAD * 2 + 22 * len(queries)
    max_log = math.log10(max(depth, 10))

    def x_of(rank: int | None) -> float:
        value = math.log10(rank) if rank else max_log * 1.05
        return PAD * 3 + (W - PAD * 4) * value / (max_log * 1.05)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" role="img" aria-label="rank per question">']
    for tick in (1, 5, 10, 30, 100, 1000):
        if tick <= depth:
            x = x_of(tick)
            parts.append(f'<line x1="{x:.1f}" y1="{PAD}" x2="{x:.1f}" y2="{height - PAD}" stroke="#ddd"/>')
            parts.append(f'<text x="{x:.1f}" y="{PAD - 8}" font-size="11" text-anchor="middle">{tick}</text>')
    parts.append(f'<text x="{x_of(None):.1f}" y="{PAD - 8}" font-size="11" text-anchor="middle">miss</text>')
    for i, q in enumerate(queries):
        y = PAD + 11 + 22 * i
        label = html.escape(q.label[:28])
        parts.append(f'<text x="{PAD * 3 - 6}" y="{y + 4}" font-size="11" text-anchor="end">{label}</text>')
        for j, method in enumerate(result.methods):
            rank = result.scores[method][i].first_rank
            parts.append(
                f'<circle cx="{x_of(rank) + (j - len(result.methods) / 2) * 3:.1f}" cy="{y}" r="5" fill="{COLOURS[j % len(COLOURS)]}" '
                f'fill-opacity="0.8"><title>{html.escape(method)}: {rank or "miss"}</title></circle>'
            )
    parts.append("</svg>")
    return "".join(parts)


def _hit_curves(result: EvalResult, max_k: int = 20) -> str:
    """Share of questions whose first relevant hit is within the top k, for k = 1..max_k."""
    n = len(result.query_file.queries) or 1
    plot_w, plot_h = W - PAD * 2, H - PAD * 2
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img" aria-label="top-k hit curves">']
    parts.append(f'<rect x="{PAD}" y="{PAD}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>')
    for frac in (0, 0.25, 0.5, 0.75, 1.0):
        y = PAD + plot_h * (1 - frac)
        parts.append(f'<text x="{PAD - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{int(frac * 100)}%</text>')
    for k in (1, 5, 10, 15, 20):
        x = PAD + plot_w * (k - 1) / (max_k - 1)
        parts.append(f'<text x="{x:.1f}" y="{H - PAD + 16}" font-size="11" text-anchor="middle">k={k}</text>')
    for j, method in enumerate(result.methods):
        ranks = [s.first_rank for s in result.scores[method]]
        points = []
        for k in range(1, max_k + 1):
            share = sum(1 for r in ranks if r is not None and r <= k) / n
            points.append(f"{PAD + plot_w * (k - 1) / (max_k - 1):.1f},{PAD + plot_h * (1 - share):.1f}")
        colour = COLOURS[j % len(COLOURS)]
        parts.append(f'<polyline points="{" ".join(points)}" fill="none" stroke="{colour}" stroke-width="2"/>')
        parts.append(f'<text x="{PAD + 8}" y="{PAD + 16 + 14 * j}" font-size="12" fill="{colour}">{html.escape(method)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _table(result: EvalResult) -> str:
    head = "".join(f"<th>{html.escape(m)}</th>" for m in result.methods)
    rows = []
    for i, q in enumerate(result.query_file.queries):
        phrase, word = result.grep_counts[i]
        cells = "".join(f"<td>{result.scores[m][i].first_rank or '—'}</td>" for m in result.methods)
        rows.append(
            f"<tr><td>{html.escape(q.label)}</td><td>{html.escape(q.query)}</td>"
            f"<td>{'' if phrase is None else phrase}</td><td>{'' if word is None else word}</td>{cells}</tr>"
        )
    summary = result.summary()
    for label, attr, fmt in (("top 5", "top5", "{}"), ("top 10", "top10", "{}"), ("MRR", "mrr", "{:.3f}"), ("NDCG@10", "ndcg10", "{:.3f}")):
        cells = "".join(f"<td><b>{fmt.format(getattr(summary[m], attr))}</b></td>" for m in result.methods)
        rows.append(f'<tr class="sum"><td colspan="4">{label}</td>{cells}</tr>')
    return (
        "<table><thead><tr><th>target</th><th>question</th><th>grep phrase</th><th>grep word</th>"
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def html_report(result: EvalResult, depth: int) -> str:
    scope = f" — scope {', '.join(result.scope)}" if result.scope else ""
    title = html.escape(f"codewhere eval: {result.query_file.name}{scope}")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
td, th {{ border: 1px solid #ccc; padding: 3px 8px; text-align: left; }}
tr.sum td {{ background: #f4f4f4; }}
</style></head><body>
<h1>{title}</h1>
{report_body(result, depth)}
</body></html>
"""


def report_body(result: EvalResult, depth: int) -> str:
    """The report without its page: the table and both plots (the web page shows it in its own)."""
    return f"""<p>Rank of the first relevant chunk per question and method (— = not in the top {depth}).</p>
{_table(result)}
<h2>Rank per question</h2>
{_rank_plot(result, depth)}
<h2>Questions answered within the top k</h2>
{_hit_curves(result)}
"""
