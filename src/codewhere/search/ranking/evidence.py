"""Signal `evidence`: a matching test, example or doc chunk passes `evidence_share` of its score,
split evenly, to the code chunks it calls or names; each part scaled by the weight of the edge
it follows (a call whose target was only guessed by name passes `evidence_guess_weight` of it).
Targets not yet among the candidates join them when their gain is at least `evidence_min_gain`
of the best candidate's score. Runs before `kind-prior`, which then puts the
evidence below the code it points at."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence

from codewhere.search.ranking.penalties import is_evidence_source
from codewhere.search.ranking.scores import Scores
from codewhere.types import ChunkRow

Evidence = Mapping[int, Mapping[int, float]]  # source chunk id → the chunk ids it calls or names → weight
Fetch = Callable[[Sequence[int]], Mapping[int, ChunkRow]]  # the rows of chunks not among the candidates


def transfer_evidence(run: Scores, evidence: Evidence, fetch: Fetch, order: Iterable[int]) -> None:
    """Sources are read in `order` (the ranking so far), so their notes list the best first."""
    gains: dict[int, float] = defaultdict(float)
    sources: dict[int, list[int]] = defaultdict(list)
    for i in order:
        c = run.rows[i]
        if not is_evidence_source(c):
            continue
        targets = {t: w for t, w in evidence.get(c.chunk_id, {}).items() if t != c.chunk_id}
        for target, weight in targets.items():
            gains[target] += run.p.evidence_share * run.scores[i] * weight / len(targets)
            sources[target].append(c.chunk_id)
    if not gains:
        return
    present = {c.chunk_id for c in run.rows}
    # a target outside the candidates joins only with a gain that can matter: each one joining
    # makes every later signal's work longer (nvm's tests call dozens of functions apiece)
    least = run.p.evidence_min_gain * max(run.scores, default=0.0)
    joining = [t for t, gain in gains.items() if t not in present and gain >= least]
    for row in (fetch(joining) if joining else {}).values():
        run.add(row)
    for i, c in enumerate(run.rows):
        gain = gains.get(c.chunk_id)
        if gain:
            run.scores[i] = run.scores[i] + gain
            run.note(i, "evidence", sources[c.chunk_id][:3])
