"""kill -9 an indexer right after each phase of a run, then check that nothing was lost.

    python benchmarks/crash_bench.py TREE [--kills 50] [--model NAME] [--json]

Three runs are killed in turn: a first index, a rebuild, and a refresh after edits, deletions and
additions. A dry run of each records its phase log (CODEWHERE_PHASE_LOG: scan, chunk, write,
committed, vectors, edges, swap); the kill points are spread over those logs, so every phase is
hit (random delays mostly kill before the first commit). After each kill: `status` must answer,
the next `index` must complete, and the index must then hold exactly what a clean rebuild of the
same tree holds (chunks and their ranges, vectors, graph, statistics) and answer a few queries
exactly as a twin index that ran the same commands without being killed. (Not as the clean
rebuild: equal scores are ordered by chunk id, and an index's history numbers its chunks, so a
tie at a list's cut can change the candidates; that holds without any kill.) The tree is copied
first; the original is never touched.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

SCENARIOS = ("first index", "rebuild", "refresh")
PHASES = ("swap", "vectors", "edges", "scan", "committed", "write", "chunk")  # the rarer in a log first
QUERIES = ("parse the configuration file", "retry", "open a connection", "format an error message", "test")


def codewhere(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "codewhere", *args], capture_output=True, text=True, env=env, timeout=900)


def edit_tree(root: Path, round_number: int) -> None:
    """Change a third of the files, delete a few, add a few: what a refresh meets after a pull."""
    files = sorted(p for p in root.rglob("*.py") if p.is_file())
    for i, path in enumerate(files):
        if i % 3 == round_number % 3:
            path.write_text(path.read_text(encoding="utf-8", errors="replace") + f"\n\ndef added_in_round_{round_number}_{i}():\n    return {i}\n")
        elif i % 17 == round_number % 17:
            path.unlink()
    (root / f"new_module_{round_number}.py").write_text(f"def brand_new_{round_number}(value):\n    return value * 2\n")


def _top_hits(hits: list) -> tuple[list[float], list[tuple[str, int, int]]]:  # noqa: ANN001 — a list of Hit
    """The five best scores, and the hits scoring above the fifth. Equal scores are ordered by
    chunk id, which an index's history changes (a rebuild numbers chunks in scan order), so a
    hit tied with the fifth may or may not be among the five in an equally good index."""
    scores = [round(h.score, 6) for h in hits[:5]]
    cutoff = scores[-1] if scores else 0.0
    return scores, sorted((h.path, h.start_line, h.end_line) for h in hits if round(h.score, 6) > cutoff)


def digest(root: Path, index: Path, env: dict[str, str], model: str) -> dict[str, str]:
    """What the index holds, a hash per part: chunk ranges, vectors, graph, statistics, top hits."""
    from codewhere.api import Index
    from codewhere.config import Settings
    from codewhere.types import Filters

    old = dict(os.environ)
    os.environ.update(env)
    try:
        with Index.open(root, index, settings=Settings.from_env(), model=model) as opened:
            stats = opened.status()
            parts: dict[str, object] = {
                "chunks": sorted(opened.store.chunk_spans(Filters())), "vectors": opened.store.vector_count(),
                "graph": opened.graph_stats(), "stats": (stats.files, stats.chunks, stats.kinds, stats.languages),
                "hits": [_top_hits(opened.search(q, k=10)) for q in QUERIES],
            }
    finally:
        os.environ.clear()
        os.environ.update(old)
    return {name: hashlib.sha256(json.dumps(part, sort_keys=True, default=str).encode()).hexdigest()[:16]
            for name, part in parts.items()}


def phase_log(args: list[str], env: dict[str, str]) -> list[str]:
    run = codewhere(*args, env={**env, "CODEWHERE_PHASE_LOG": "1"})
    if run.returncode != 0:
        raise SystemExit(f"the dry run failed: {run.stderr}")
    return [line.removeprefix("codewhere: ") for line in run.stderr.splitlines() if line.startswith("codewhere: ")
            and line.removeprefix("codewhere: ") in PHASES]


def kill_points(log: list[str], count: int) -> list[int]:
    """`count` 1-based event numbers of `log`: the first of each phase (the rarer first), then spread evenly; a log
    shorter than `count` is killed after the same event again, in a later round."""
    rare_first = sorted(dict.fromkeys(log), key=lambda name: PHASES.index(name))
    firsts = [log.index(name) + 1 for name in rare_first]
    spread = [max(1, round((i + 0.5) * len(log) / count)) for i in range(count)]
    points = list(dict.fromkeys([*firsts, *spread]))[:count]
    while len(points) < count:
        points.append(points[len(points) % len(firsts)])
    return sorted(points)


def kill_after(args: list[str], env: dict[str, str], event: int) -> bool:
    """Start the indexer and kill -9 it right after its `event`-th phase line; False if it ended first."""
    proc = subprocess.Popen([sys.executable, "-m", "codewhere", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env={**env, "CODEWHERE_PHASE_LOG": "1"})
    seen = 0
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("codewhere: "):
            seen += 1
            if seen == event:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                return True
    proc.wait()
    return False


def run(tree: Path, kills: int, model: str) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="crash-bench-"))
    root = work / "tree"
    shutil.copytree(tree, root, symlinks=True)
    env = {**os.environ, "CODEWHERE_CACHE_DIR": str(work / "cache")}
    index = work / "index.sqlite"
    twin = work / "twin.sqlite"  # the same runs, never killed
    clean = work / "clean.sqlite"
    common = ["--index", str(index), "--model", model]
    logs = {}
    for scenario in SCENARIOS:  # dry runs, each from the state its kills start from
        if scenario == "first index":
            for extra in ("", "-wal", "-shm"):
                Path(f"{index}{extra}").unlink(missing_ok=True)
            logs[scenario] = phase_log(["index", str(root), *common], env)
        elif scenario == "rebuild":
            logs[scenario] = phase_log(["index", str(root), "--rebuild", *common], env)
        else:
            edit_tree(root, 0)
            logs[scenario] = phase_log(["index", str(root), *common], env)
    per_scenario = [kills // len(SCENARIOS) + (i < kills % len(SCENARIOS)) for i in range(len(SCENARIOS))]
    results: list[dict[str, object]] = []
    hit_phases: Counter[str] = Counter()
    for scenario, count in zip(SCENARIOS, per_scenario, strict=True):
        log = logs[scenario]
        points = kill_points(log, count)
        for round_number, event in enumerate(points, start=1):
            if scenario == "first index":
                for path in (index, twin):
                    for extra in ("", "-wal", "-shm"):
                        Path(f"{path}{extra}").unlink(missing_ok=True)
                args = ["index", str(root)]
            elif scenario == "rebuild":
                args = ["index", str(root), "--rebuild"]
            else:
                edit_tree(root, round_number)
                args = ["index", str(root)]
            killed = kill_after([*args, *common], env, event)
            hit_phases[log[event - 1]] += killed
            status = codewhere("status", str(root), "--index", str(index), "--json", env=env)
            recovered = codewhere("index", str(root), *common, env=env)
            codewhere(*args, "--index", str(twin), "--model", model, env=env)
            for extra in ("", "-wal", "-shm"):
                Path(f"{clean}{extra}").unlink(missing_ok=True)
            codewhere("index", str(root), "--index", str(clean), "--model", model, env=env)
            ours, theirs = digest(root, index, env, model), digest(root, clean, env, model)
            ours_hits, twin_hits = ours.pop("hits"), digest(root, twin, env, model)["hits"]
            theirs.pop("hits")
            differs = sorted(k for k in ours if ours[k] != theirs[k]) + (["hits"] if ours_hits != twin_hits else [])
            results.append({"scenario": scenario, "after_phase": log[event - 1], "event": event, "killed": killed,
                            "status_ok": status.returncode in (0, 1) and "Traceback" not in status.stderr,
                            "next_index_ok": recovered.returncode == 0, "equals_clean_rebuild": not differs,
                            "differs_in": differs})
    shutil.rmtree(work, ignore_errors=True)
    good = [r for r in results if r["status_ok"] and r["next_index_ok"] and r["equals_clean_rebuild"]]
    return {"kills": len(results), "killed_mid_run": sum(bool(r["killed"]) for r in results),
            "recovered_and_equal": len(good), "phases_hit": dict(hit_phases),
            "phases_aimed_at": dict(Counter(str(r["after_phase"]) for r in results)),
            "failures": [r for r in results if r not in good]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", type=Path)
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--model", default="default")
    args = parser.parse_args()
    print(json.dumps(run(args.tree, args.kills, args.model), indent=1))


if __name__ == "__main__":
    main()
