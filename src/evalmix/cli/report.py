"""``evalmix report`` and ``evalmix demo``: read -> analyze -> write the report folder."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast, get_args

from evalmix._escape import terminal
from evalmix.cli._common import (
    add_command,
    nonnegative_float,
    nonnegative_int,
    parse_cluster,
    positive_int,
    stop_if_interrupted,
)
from evalmix.data.readers import FORMATS
from evalmix.errors import DroppedRowsWarning, InvalidOptionError
from evalmix.vocabulary import ControlledEstimand, LogFormat

__all__ = ["add_parser", "run_report", "run_demo", "parse_statistics"]


def _command_line() -> str:
    argv = list(sys.argv)
    if argv:
        argv[0] = Path(argv[0]).name
    return " ".join(shlex.quote(a) for a in argv)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fast", action="store_true",
                   help="design-based methods only: no model fit unless --backend asks for "
                        "one, never MCMC")
    p.add_argument("--reps", type=positive_int, default=None, metavar="B",
                   help="bootstrap replicates (default 2000, or the --plan's)")
    p.add_argument("--seed", type=nonnegative_int, default=None, metavar="S",
                   help="master seed")
    p.add_argument("--draws", type=positive_int, default=None,
                   help="posterior draws per chain for the Bayesian model (default: the "
                        "back end's, about 1,000 bulk ESS)")
    p.add_argument("--model-timeout", "--mcmc-timeout", dest="model_timeout",
                   type=nonnegative_float, default=300, metavar="SECONDS",
                   help="stop each model fit (Laplace/REML GLMM, MCMC) after this long and "
                        "report without it (default 300; 0 = no limit; --mcmc-timeout is "
                        "the old name)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--no-csv-escape", dest="escape_csv", action="store_false",
                   help="write CSV text cells as they are (by default a cell a spreadsheet "
                        "would run as a formula, starting with = + - @, gets a leading ')")


def add_read_arguments(rp: argparse.ArgumentParser) -> None:
    """The options that say how to read DATA (``report``, ``plan check``)."""
    rp.add_argument("data", metavar="DATA",
                    help="CSV/TSV/Parquet/JSONL table, or an eval log file or folder "
                         "(Inspect, lm-eval, AlpacaEval, Arena/FastChat, arena-hard; see --format)")
    rp.add_argument("--format", default="auto", choices=FORMATS,
                    help="input format (default auto: a table when --outcome or --roles is "
                         "given, else detected from the file type and content)")
    rp.add_argument("--read-option", dest="read_options", action="append", default=[],
                    metavar="KEY=VALUE",
                    help="log reader option, repeatable: scorer=NAME (inspect), metric=NAME, "
                         "filter=NAME, model=FIELD (lm_eval), failures=tie|drop "
                         "(alpaca_eval), model_a_first=true (battles), answers=DIR "
                         "(arena_hard, battles: model_answer files, for length and style "
                         "control)")
    rp.add_argument("--replicate",
                    help="column numbering repeated runs (epochs, repeated judge runs): "
                         "nested within the item, never a cluster level")
    rp.add_argument("--outcome", help="outcome column (score, correct, or a/b/tie verdict)")
    rp.add_argument("--condition", help="condition/model column (score tables)")
    rp.add_argument("--model-a", dest="model_a", help="pairwise: first model column")
    rp.add_argument("--model-b", dest="model_b", help="pairwise: second model column")
    rp.add_argument("--first-shown", dest="first_shown",
                    help="pairwise: column saying which answer was shown first (a/b)")
    rp.add_argument("--ties", choices=("exclude", "half", "separate"), default=None,
                    help="pairwise tie policy (default half)")
    rp.add_argument("--cluster", action="append", default=[], metavar="ROLE=COL",
                    help="cluster factor, repeatable (e.g. --cluster item=item_id); "
                         "ROLE=A:B:C joins other roles into an interaction cell (e.g. "
                         "--cluster cell=persona:scenario:author)")
    rp.add_argument("--sampled", default=None, metavar="ROLES",
                    help="comma-separated cluster roles the claim generalises over "
                         "(default: every role but judges, replicates and strata), e.g. "
                         "--sampled scenario,persona")
    rp.add_argument("--strata", default=None, metavar="ROLES",
                    help="comma-separated cluster roles that are strata: chosen, not "
                         "sampled (benchmark subsets, categories); held fixed, intervals "
                         "cluster within them. Replaces the log format's default strata "
                         "(e.g. AlpacaEval's item_group); --strata '' declares none")
    rp.add_argument("--roles", help="roles.toml with the same keys")
    rp.add_argument("--encoding", default=None,
                    help="text encoding of a CSV/TSV/JSON file (default utf-8), e.g. latin-1")
    rp.add_argument("--on-unparsed", dest="on_unparsed", choices=("auto", "error", "drop"),
                    default="auto",
                    help="outcomes that cannot be read: drop up to 5%% and refuse more "
                         "(auto), refuse any (error), or drop all (drop)")
    rp.add_argument("--outcome-kind", dest="outcome_kind",
                    choices=("auto", "verdict", "winner"), default=None,
                    help="pairwise: the outcome holds a verdict (a/b/tie) or the winner's "
                         "name (needed when a model is called a, b, 0, 1 or tie)")


def add_parser(subparsers: Any) -> list[str]:
    """Register ``report`` and ``demo`` on the top-level CLI."""
    rp = add_command(subparsers, "report")
    add_read_arguments(rp)
    rp.add_argument("--human", action="append", default=None, metavar="RATER",
                    help="a value of the judge role that is a person (repeatable): adds the "
                         "'Judges against humans' section")
    rp.add_argument("--rater-kind", dest="rater_kind", default=None, metavar="COL",
                    help="column saying human / llm for each judge-role value (instead of "
                         "--human)")
    rp.add_argument("--backend", choices=("bayes", "statsmodels"), default=None,
                    help="model back end (default: statsmodels, plus bayes unless --fast)")
    rp.add_argument("--cluster-levels", "--levels", dest="cluster_levels", nargs="*",
                    default=None, metavar="LEVEL",
                    help="cluster levels to run (roles, a+b for multiway, none; --levels is "
                         "the old name)")
    rp.add_argument("--no-letters", dest="letters", action="store_false",
                    help="no tier letters on the leaderboard (more than 6 models): the rank "
                         "ranges carry the comparisons")
    rp.add_argument("--no-sensitivity", dest="sensitivity", action="store_false",
                    help="do not refit the Bayesian model with 2.5x wider SD priors "
                         "(by default done when a cluster factor has fewer than 5 levels; "
                         "it doubles the MCMC time)")
    rp.add_argument("--plan", default=None, metavar="PLAN.toml",
                    help="analysis plan declared in advance (docs/plans.md): the report opens "
                         "with its primary result, marks deviations, labels the rest "
                         "exploratory; its ties and reps apply")
    rp.add_argument("--statistic", dest="statistics", action="append", default=[],
                    metavar="[NAME=]SPEC",
                    help="custom statistic, repeatable, bootstrapped at the recommended "
                         "cluster level: module:function (a function of the rows, e.g. "
                         "evalmix.inference.statistics:red_flag_rate) or an expression of "
                         "column rates, e.g. 'mean(red_flag, condition == \"B\") / "
                         "mean(red_flag, condition == \"A\")' (parsed, never run); it "
                         "sees every column of a table file")
    rp.add_argument("--randomized", action="store_true",
                    help="the conditions were assigned at random (within or between "
                         "clusters of the recommended level): add the cluster "
                         "randomization test beside the design-based p-value")
    rp.add_argument("--controlled", choices=get_args(ControlledEstimand), default="auto",
                    help="the length- or style-controlled estimand reported beside the raw "
                         "one, with intervals and a plot: auto (AlpacaEval's length-controlled "
                         "win rate when one baseline is in every row and the answer lengths "
                         "are known; style-controlled Bradley-Terry for battles with answer "
                         "features), length, style, or none; a table file's answer "
                         "columns (length_a/length_b, ...) are read for length or style")
    rp.add_argument("--baseline", default=None, metavar="MODEL",
                    help="the length-controlled win rate's baseline (default: the model in "
                         "every row); implies --controlled length")
    rp.add_argument("--style-features", dest="style_features", default=None,
                    metavar="F1,F2",
                    help="style control's answer features, comma-separated (default: those "
                         "of length,headers,lists,bold the data has; a table file's column "
                         "pairs F_a/F_b also count); implies --controlled style")
    rp.add_argument("--out", required=True, metavar="DIR", help="output folder")
    _common(rp)
    rp.set_defaults(func=run_report)

    dp = add_command(subparsers, "demo")
    dp.add_argument("--out", default="demo-report", metavar="DIR", help="output folder")
    _common(dp)
    dp.set_defaults(func=run_demo, seed=2026)
    return ["report", "demo"]


def _role_lists(args: argparse.Namespace) -> dict[str, list[str]]:
    """``--sampled`` and ``--strata`` as lists of role names (only those given)."""
    return {key: [r.strip() for r in value.split(",") if r.strip()]
            for key, value in (("sampled", args.sampled), ("strata", args.strata))
            if value is not None}


def read_plan_for(args: argparse.Namespace) -> Any:
    """The ``--plan`` file read (None without one); ``--ties`` and ``--reps`` given
    beside it must agree with it."""
    if not getattr(args, "plan", None):
        return None
    from evalmix.data.analysis_plan import read_plan

    plan = read_plan(args.plan)
    for option, value, key, planned in (("--ties", args.ties, "ties", plan.ties),
                                        ("--reps", getattr(args, "reps", None),
                                         "[interval] reps", plan.reps)):
        if value is not None and value != planned:
            raise InvalidOptionError(
                f"{option} {value} contradicts the analysis plan {plan.path!r} ({key} = "
                f"{planned!r}); drop {option} (the plan's applies), or change the plan")
    return plan


def _read_log(args: argparse.Namespace, fmt: str, ties: str | None = None) -> Any:
    """A log format: reader options, clusters, ties and replicate go to its reader."""
    from evalmix.data.readers import read_log

    kwargs: dict[str, Any] = {}
    for item in args.read_options:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidOptionError(f"--read-option expects KEY=VALUE (e.g. scorer=match), got "
                                     f"{item!r}")
        low = value.strip().lower()
        kwargs[key.strip()] = {"true": True, "false": False}.get(low, value.strip())
    extra = {"clusters": parse_cluster(args.cluster) or None, "ties": args.ties or ties,
             "replicate": args.replicate, **_role_lists(args)}
    kwargs.update({k: v for k, v in extra.items() if v is not None})
    return read_log(args.data, format=cast(LogFormat, fmt), **kwargs)


def read_table(args: argparse.Namespace, plan: Any = None) -> Any:
    """DATA read as the reading options say (a ``plan``'s tie handling unless --ties)."""
    return _read(args, ties=plan.ties if plan is not None else None)


def _read(args: argparse.Namespace, ties: str | None = None) -> Any:
    from evalmix.data import read
    from evalmix.data.readers import detect_format

    fmt = args.format
    if fmt == "auto":
        fmt = "table" if (args.outcome or args.roles) else detect_format(args.data)
    if fmt != "table":
        return _read_log(args, fmt, ties)
    if not args.outcome and not args.roles:
        raise InvalidOptionError("--outcome is required (or give it in --roles roles.toml)")
    clusters = parse_cluster(args.cluster) or None
    kwargs: dict[str, Any] = {
        "outcome": args.outcome, "condition": args.condition, "model_a": args.model_a,
        "model_b": args.model_b, "first_shown": args.first_shown, "clusters": clusters,
        "roles": args.roles, "replicate": args.replicate, "encoding": args.encoding,
        "outcome_kind": args.outcome_kind,
    }
    if (args.ties or ties) is not None:
        kwargs["ties"] = args.ties or ties
    kwargs.update(_role_lists(args))
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    # the dropped-rows count (and examples) always reaches the terminal
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DroppedRowsWarning)
        table = read(args.data, on_unparsed=args.on_unparsed, **kwargs)
    for w in caught:
        if issubclass(w.category, DroppedRowsWarning):
            print(terminal(f"evalmix: warning: {' '.join(str(w.message).split())}"),
                  file=sys.stderr)
    if args.ties is not None and table.kind != "pairwise":
        raise InvalidOptionError(
            f"--ties {args.ties} applies to pairwise tables (with --model-a and --model-b); "
            f"{args.data!r} was read as a scores table, which has no ties. Drop --ties")
    return table


def _finish(report: Any, out: Path, t0: float, escape_csv: bool = True) -> None:

    stop_if_interrupted()  # a sampler may have returned cut-short draws on Ctrl-C
    paths = report.write(out, escape_csv=escape_csv)
    head = report.headline
    print(terminal(f"evalmix: wrote {len(paths)} files to {out}/ in "
                   f"{time.perf_counter() - t0:.0f} s (open {paths['report.html']})"))
    if not head.empty:
        r = head["width_ratio"].astype(float)
        known = r.notna()
        rec = report.recommendation
        what = terminal(f"{rec.get('method')} by {rec.get('cluster') or 'none'}")
        if known.any():
            print(f"evalmix: recommended intervals ({what}) are {r[known].median():.1f}x the "
                  f"naive width (median over {int(known.sum())} contrasts); "
                  f"{int(head['fragile'].sum())} fragile")
        if (~known).any():
            print(f"evalmix: {int((~known).sum())} contrast(s) not estimable at the "
                  f"recommended level ({what}); see the report's headline")
    _say_controlled(report)


def _say_controlled(report: Any) -> None:
    """One line on the controlled estimand the report holds (or could not make)."""
    chosen = report.summary.get("controlled")
    for kind, rows, name, estimand, what in (
            ("length", report.length_control, "length_control", "lc_win_rate",
             "length-controlled win rate"),
            ("style", report.style_control, "style_control", "bt_style_controlled",
             "style-controlled Bradley-Terry")):
        if rows is not None:
            n = int((rows["estimand"] == estimand).sum())
            print(f"evalmix: {what} beside the raw for {n} models ({name}.csv, "
                  f"plots/{name}.png)")
        elif chosen == kind:
            print(f"evalmix: warning: the {what} could not be made; the report's warnings "
                  "say why", file=sys.stderr)


def _keep_partial(out: Path) -> KeyboardInterrupt:
    """The interrupt to re-raise: it names the partial report when one was written
    (design-based intervals, no completion marker) and nothing replaced it."""
    from evalmix.report.report import REPORT_MARKER

    if (out / "intervals.csv").is_file() and not (out / REPORT_MARKER).exists():
        return KeyboardInterrupt(f"the design-based intervals are in {out / 'intervals.csv'}"
                                 f" ({out / 'report.md'} is marked incomplete)")
    return KeyboardInterrupt()


def _humans(args: argparse.Namespace, table: Any) -> list[str] | None:
    """The judge-role values that are people, from --human or --rater-kind COL."""
    if args.human and args.rater_kind:
        raise InvalidOptionError("give --human or --rater-kind, not both")
    if args.human:
        return list(args.human)
    if not args.rater_kind:
        return None
    from evalmix.compare.recommend import judge_role
    from evalmix.data.load import load_frame

    role = judge_role(table)
    if role is None:
        raise InvalidOptionError("--rater-kind needs a judge role: --cluster judge=COLUMN")
    column = table.roles.clusters[role]
    frame, _ = load_frame(args.data, text_columns=[column, args.rater_kind],
                          encoding=args.encoding)
    if args.rater_kind not in frame.columns:
        raise InvalidOptionError(f"--rater-kind {args.rater_kind!r}: no such column in "
                                 f"{args.data!r}")
    kind = frame[args.rater_kind].astype(str).str.strip().str.lower()
    return sorted(frame.loc[kind == "human", column].astype(str).str.strip().unique())


def parse_statistics(specs: Sequence[str]) -> dict[str, Any]:
    """``--statistic`` values as name -> statistic: ``NAME=SPEC`` or ``SPEC``, where SPEC
    is ``module:function`` (imported; the module the user named is trusted) or an
    expression of column rates (parsed, never run)."""
    import importlib

    from evalmix.inference.sums import expression

    out: dict[str, Any] = {}
    for raw in specs:
        name, sep, spec = raw.partition("=")
        if not sep or "(" in name or not name.strip().isidentifier():
            name, spec = "", raw
        spec = spec.strip()
        module, colon, attr = spec.partition(":")
        if colon and "(" not in spec and module.replace(".", "").replace("_", "").isalnum():
            try:
                fn = getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError) as exc:
                raise InvalidOptionError(
                    f"--statistic {raw!r}: cannot import {attr!r} from module {module!r} "
                    f"({exc}); give module:function with the module on the Python path") \
                    from None
            label = name.strip() or attr
        else:
            fn = expression(spec)
            label = name.strip() or fn.name
        if label in out:
            raise InvalidOptionError(f"--statistic: two statistics named {label!r}; name "
                                     "them with NAME=...")
        out[label] = fn
    return out


def _statistics(args: argparse.Namespace) -> tuple[dict[str, Any] | None, Any]:
    """``--statistic`` parsed, and the table file's columns (None for a log, or when
    neither the statistics nor a controlled estimand asked for need them: ``--controlled
    auto`` alone does not read the file twice)."""
    statistics = parse_statistics(args.statistics) if args.statistics else None
    table_file = args.format == "table" or (args.format == "auto" and (args.outcome or
                                                                       args.roles))
    asked = (args.controlled in ("length", "style") or args.baseline is not None
             or args.style_features is not None)
    if not table_file or (statistics is None and not asked):
        return statistics, None
    from evalmix.data.load import load_frame

    return statistics, load_frame(args.data, encoding=args.encoding)[0]


def _style_features(args: argparse.Namespace) -> list[str] | None:
    if args.style_features is None:
        return None
    feats = [f.strip() for f in args.style_features.split(",") if f.strip()]
    if not feats:
        raise InvalidOptionError("--style-features expects feature names, e.g. "
                                 "--style-features length,headers,lists,bold")
    return feats


def run_report(args: argparse.Namespace) -> int:
    from evalmix.report.analyze import analyze
    from evalmix.report.report import check_report_dir

    t0 = time.perf_counter()
    check_report_dir(args.out)  # before the work: an unwritable --out fails at once
    plan = read_plan_for(args)
    table = read_table(args, plan)
    humans = _humans(args, table)
    statistics, columns = _statistics(args)
    try:
        report = analyze(
            table, cluster_levels=args.cluster_levels, backend=args.backend, fast=args.fast,
            reps=args.reps or 2000, seed=args.seed, plan=plan, progress=not args.quiet,
            draws=args.draws,
            model_timeout=args.model_timeout, command=_command_line(), out=args.out,
            fit_options=None if args.sensitivity else {"sensitivity": None}, humans=humans,
            letters=args.letters, statistics=statistics, columns=columns,
            randomized=args.randomized, controlled=args.controlled, baseline=args.baseline,
            style_features=_style_features(args))
        _finish(report, Path(args.out), t0, args.escape_csv)
    except KeyboardInterrupt:
        raise _keep_partial(Path(args.out)) from None
    return 0


def run_demo(args: argparse.Namespace) -> int:
    from evalmix.report.demo import demo_report
    from evalmix.report.report import check_report_dir

    t0 = time.perf_counter()
    check_report_dir(args.out)
    try:
        report = demo_report(seed=args.seed, fast=args.fast, reps=args.reps or 2000,
                             draws=args.draws, progress=not args.quiet,
                             model_timeout=args.model_timeout, command=_command_line(),
                             out=args.out)
        _finish(report, Path(args.out), t0, args.escape_csv)
    except KeyboardInterrupt:
        raise _keep_partial(Path(args.out)) from None
    t = report.truth
    if t is not None and not t.empty:
        rec = t[t["recommended"]]
        print(f"evalmix: truth check: {int(rec['contains_truth'].sum())} of {len(rec)} "
              f"recommended intervals ({report.recommendation.get('method')} | "
              f"{report.recommendation.get('cluster')}) contain the simulator's true value; "
              f"{int(t['contains_truth'].sum())} of {len(t)} rows checked (naive, multiway "
              "and model rows included). " + str(report.summary.get("truth_note", "")))
    return 0
