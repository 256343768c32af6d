"""Known-truth data-generating processes (same schema as real data).

Every simulator takes ``seed`` and returns a :class:`SimResult` whose ``data`` is a
table :func:`evalmix.read` accepts (``result.table()`` reads it) and whose ``truth``
holds the parameters and true estimands. Coverage studies that
run interval methods on these simulators live in :func:`evalmix.plan.coverage`.
"""

from __future__ import annotations

from evalmix.sim._common import SimResult
from evalmix.sim.boards import arena_battles, baseline_leaderboard, round_robin
from evalmix.sim.judges import judge_labels
from evalmix.sim.pairwise import DEFAULT_SDS, pairwise_judges
from evalmix.sim.scores import cluster_sizes, clustered_scores

__all__ = ["SimResult", "clustered_scores", "cluster_sizes", "pairwise_judges", "DEFAULT_SDS",
           "arena_battles", "baseline_leaderboard", "round_robin", "judge_labels"]
