"""One word per idea: the public signatures and the option vocabularies.

The walk below reads every public function of the package root (and the methods of its
public classes and the functions of its public sub-modules such as ``evalmix.sim``) and
fails when one parameter name is written with two types or two defaults, unless the name
is listed in ``DIFFERENT_BY_DESIGN`` with the reason. A new function that spells ``seed``
or ``level`` its own way fails here; the list is meant to shrink (issue "Code health").
"""

from __future__ import annotations

import inspect
import typing
from collections import defaultdict

import evalmix
import evalmix.vocabulary as vocabulary

#: names whose type or default differs between functions, each with the reason; every
#: entry is checked to still differ (an entry that no longer does must be removed)
DIFFERENT_BY_DESIGN: dict[str, str] = {
    "method": "each function's own vocabulary (interval, agreement, G study, PPI, fit)",
    "estimand": "each function's own vocabulary (interval, leaderboard, PPI)",
    "pairs": "agreement's rater pairs vs the leaderboard's list of model pairs",
    "data": "a human-ratings file or frame vs an EvalTable or frame",
    "table": "annotated where the function does not refuse frames itself",
    "cluster": "one role (human ratings) vs one or several roles (tables)",
    "by": "one stratum role (leaderboard) vs one or several (humans)",
    "reps": "one word for every Monte Carlo count, its default sized to its use: bootstrap "
            "intervals 2,000, permutation p-values 9,999, the max-t quantile 10,000, the "
            "agreement bootstrap 999, the LC win rate's GLM refits 200, None: the method's own",
    "backend": "analyze(backend=None) picks which back ends run; fit takes one (an object or name)",
    "family": "interval's regression family vs a model family (None: from the outcome)",
    "ties": "how pairwise ties count in a table vs whether human ties are kept",
    "first_shown": "read maps a column when given; agreement looks for the default name",
    "conditions": "a list of conditions vs the simulator's two arms",
    "condition": "the role's name (simulators) vs an optional contrast",
    "judges": "a list of judge names vs the simulators' judge effects",
    "models": "a list of model names vs the simulators' model parameters",
    "nested": "one role vs a mapping of nestings",
    "n": "the D study's sample sizes vs the power calculation's design",
    "out": "required output folder vs optional",
    "position": "a position role vs whether a simulator adds position bias",
    "model_a": "a role's column name vs the simulator's default",
    "model_b": "a role's column name vs the simulator's default",
    "min_items": "agreement's minimum shared items vs the alt-test's (Calderon et al.)",
    "cluster_size": "simulators' sizes vs a planning input",
    "n_clusters": "simulators' defaults differ by design size",
    "n_judges": "simulators' defaults differ by design size",
    "sd_judge": "simulators' defaults differ by design",
    "tie_threshold": "simulators' defaults differ by design",
    "outcome": "read/gstudy name the source column; permutation_test a table column ('y')",
    "baseline": "an optional reference model vs the simulator's baseline name",
    "path": "an optional output path vs a file to read",
    "power": "a target power or a grid of them (planning) vs one target (compare_runs)",
    "statistic": "required by bootstrap; permutation_test defaults to the condition mean",
}


def _public_callables() -> list[tuple[str, typing.Callable[..., object]]]:
    found = []
    for name in evalmix.__all__:
        obj = getattr(evalmix, name)
        if inspect.isfunction(obj):
            found.append((name, obj))
        elif inspect.isclass(obj):
            found += [(f"{name}.{m}", f) for m, f in inspect.getmembers(obj, inspect.isfunction)
                      if not m.startswith("_")]
        elif inspect.ismodule(obj):
            found += [(f"{name}.{m}", f) for m, f in inspect.getmembers(obj, inspect.isfunction)
                      if not m.startswith("_") and f.__module__.startswith("evalmix")]
    return found


def _spellings() -> dict[str, set[tuple[str, str]]]:
    seen: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for _, func in _public_callables():
        for p in inspect.signature(func).parameters.values():
            if p.name in ("self", "cls") or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            ann = p.annotation if isinstance(p.annotation, str) else repr(p.annotation)
            default = "<required>" if p.default is p.empty else repr(p.default)
            seen[p.name].add((ann, default))
    return seen


def _differs(spellings: set[tuple[str, str]]) -> bool:
    types = {a for a, _ in spellings}
    defaults = {d for _, d in spellings if d != "<required>"}
    return len(types) > 1 or len(defaults) > 1


def test_walk_reaches_the_public_api() -> None:
    names = {n for n, _ in _public_callables()}
    assert {"read", "interval", "leaderboard", "fit", "analyze", "agreement",
            "sim.round_robin", "EvalTable.with_sampled"} <= names


def test_one_type_and_one_default_per_parameter_name() -> None:
    seen = _spellings()
    offenders = {k: sorted(v) for k, v in seen.items()
                 if _differs(v) and k not in DIFFERENT_BY_DESIGN}
    assert not offenders, f"one parameter name, two spellings: {offenders}"
    stale = sorted(k for k in DIFFERENT_BY_DESIGN if k not in seen or not _differs(seen[k]))
    assert not stale, f"no longer different, remove from DIFFERENT_BY_DESIGN: {stale}"


def test_shared_words_have_one_spelling() -> None:
    seen = _spellings()
    for name, spelling in (("seed", ("SeedLike", "None")), ("level", ("float", "0.95")),
                           ("progress", ("bool", "True"))):
        assert seen[name] <= {spelling, (spelling[0], "<required>")}, (name, seen[name])


def test_every_vocabulary_is_a_literal_of_distinct_words() -> None:
    for name in vocabulary.__all__:
        words = [w for arg in typing.get_args(getattr(vocabulary, name))
                 for w in (typing.get_args(arg) or (arg,))]
        assert words and len(words) == len(set(words)), name


def test_no_module_defines_its_own_literal_vocabulary() -> None:
    import pathlib

    root = pathlib.Path(vocabulary.__file__).parent
    own = [f"{p.relative_to(root)}:{i}" for p in root.rglob("*.py") if p.name != "vocabulary.py"
           for i, line in enumerate(p.read_text().splitlines(), 1)
           if "= Literal[" in line and not line.startswith((" ", "#"))]
    assert not own, f"define option vocabularies in evalmix/vocabulary.py: {own}"
