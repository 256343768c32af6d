"""The report folder: evalmix's alone, and nothing else in it is lost.

A report folder holds a manifest (:data:`REPORT_MARKER`, or :data:`PARTIAL_MARKER` for the
partial report written while model fits run) listing the files evalmix wrote there.
Writing a report again into such a folder replaces exactly those files, as one atomic
swap of the whole folder, and carries every other file (a user's ``notes.md``,
``extra/analysis.ipynb``) into the new folder by hard link (a copy where links are not
supported) before the swap, so a user's file is never deleted, even by an interrupted
write. A folder that is not empty and has no manifest (a user's own ``report.md``, a lone
``plots/``) is refused, as is a user's file where evalmix would write one of its own.

:func:`check_report_dir` runs before the analysis (``evalmix report`` and
``analyze(out=...)``), so a bad ``--out`` costs nothing: ``''``, the current folder or one
of its parents, a mount point, a file, a place that cannot be written. A symbolic link to
a folder is followed: the report replaces the folder it points to.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from evalmix.errors import EvalmixError, check_out_dir

__all__ = ["REPORT_MARKER", "PARTIAL_MARKER", "REPORT_FILES", "check_report_dir",
           "report_files", "swap_in", "write_manifest"]

#: written last into a complete report folder; its manifest lists the files evalmix wrote
REPORT_MARKER = ".evalmix-report"
#: the manifest of a partial report (design-based results while model fits run)
PARTIAL_MARKER = ".evalmix-partial"
_MARKERS = (REPORT_MARKER, PARTIAL_MARKER)

#: the names :meth:`~evalmix.report.report.Report.write` puts in a report folder
REPORT_FILES = frozenset({
    "intervals.csv", "variance.csv", "judges.csv", "design.json", "design.md",
    "report.html", "report.md", "summary.json", "prior_sensitivity.csv", "plots",
    "leaderboard.csv", "leaderboard_pairs.csv", "reliability.csv", "position_classes.csv",
    "length_control.csv", "style_control.csv",
    "humans_agreement.csv", "humans_alt_test.csv", "humans_anchored.csv", *_MARKERS,
    # evalmix compare (report/compare_runs.py)
    "comparison.csv", "missing.csv"})


def _shown(paths: Iterable[str], most: int = 5) -> str:
    paths = sorted(paths)
    more = f" and {len(paths) - most} more" if len(paths) > most else ""
    return ", ".join(paths[:most]) + more


def _where(out: str | os.PathLike[str]) -> Path:
    """The folder a report at ``out`` goes to (a symbolic link followed), refusing the
    places a whole-folder swap cannot replace."""
    if str(out).strip() == "":
        raise EvalmixError("--out is empty: give the folder to write the report to, e.g. "
                           "--out report")
    given = Path(out)
    d = Path(os.path.realpath(given)) if given.is_symlink() else Path(os.path.abspath(given))
    cwd = Path.cwd().resolve()
    if d == d.parent or d.resolve() == cwd or d.resolve() in cwd.parents:
        raise EvalmixError(
            f"--out {str(out)!r} is the current folder (or holds it): evalmix writes its "
            "report as a folder of its own, replaced as a whole on the next run. Give a "
            "new or empty sub-folder, e.g. --out report")
    if d.is_dir() and os.path.ismount(d):
        raise EvalmixError(
            f"--out {str(out)!r} is a mount point: evalmix writes a report by renaming a "
            "finished folder into place, which a mount point cannot take. Give a "
            f"sub-folder, e.g. --out {str(given / 'report')!r}")
    return d


def report_files(d: Path) -> set[str] | None:
    """The files evalmix wrote in report folder ``d`` (relative paths, from its manifest),
    or None when ``d`` is not an evalmix report folder."""
    for name in _MARKERS:
        marker = d / name
        if marker.is_file():
            try:
                files = json.loads(marker.read_text(encoding="utf-8")).get("files")
            except (OSError, ValueError, AttributeError):
                files = None
            if not isinstance(files, list):  # unreadable: only the names evalmix writes
                files = [str(p.relative_to(d)) + ("/" if p.is_dir() else "")
                         for p in d.rglob("*") if p.relative_to(d).parts[0] in REPORT_FILES]
            return {str(f) for f in files} | set(_MARKERS)
    return None


def _user_files(d: Path, ours: set[str]) -> list[str]:
    """Relative paths of what in ``d`` is not evalmix's: files, symbolic links and empty
    folders."""
    out = []
    for root, dirs, files in os.walk(d):
        rel = Path(root).relative_to(d)
        for name in files + [x for x in dirs if os.path.islink(Path(root) / x)]:
            path = str(rel / name)
            if path not in ours:
                out.append(path)
        if not dirs and not files and rel != Path(".") and str(rel) + "/" not in ours:
            out.append(str(rel) + "/")
    return sorted(out)


#: the figures a report may write into ``plots/``
_FIGURE = re.compile(r"plots/(?:headline|variance|position|controlled|leaderboard|"
                     r"length_control|style_control|"
                     r"forest_\d+)\.png")


def _clashes(user: Iterable[str]) -> list[str]:
    """User files where evalmix may write one of its own."""
    return [u for u in user if u.rstrip("/") in REPORT_FILES or _FIGURE.fullmatch(u)]


def check_report_dir(out: str | os.PathLike[str]) -> Path:
    """Check that ``out`` can take a report, before the analysis starts; the folder the
    report goes to.

    ``out`` may not exist yet, be an empty folder, or hold an earlier evalmix report
    (whose files :meth:`~evalmix.report.report.Report.write` replaces, keeping every other
    file); anything else raises :class:`~evalmix.errors.EvalmixError` naming the problem
    and the user's own path: a folder of other files, a user's file where a report file
    goes, the current folder, a mount point, a file, a place that cannot be written.
    """
    d = _where(out)
    if Path(out).is_symlink():
        check_out_dir(d, what=f"--out {str(out)!r} (a link to)")
    else:
        check_out_dir(out)
    try:
        names = sorted(p.name for p in d.iterdir()) if d.is_dir() else []
    except FileNotFoundError:  # another writer is swapping its report in right now
        names = []
    if not names:
        return d
    ours = report_files(d)
    if ours is None:
        raise EvalmixError(
            f"--out {str(out)!r} already holds files that are not an evalmix report "
            f"({_shown(names)}); writing the report there would replace them. Choose a "
            "new or empty folder")
    clash = _clashes(_user_files(d, ours))
    if clash:
        raise EvalmixError(
            f"--out {str(out)!r} holds files evalmix did not write where the report puts "
            f"its own ({_shown(clash)}); move them, or choose another folder")
    return d


def write_manifest(tmp: Path, marker: str) -> None:
    """Write ``marker`` into the finished folder ``tmp``, listing every file and folder
    in it (folders end in ``/``)."""
    files = sorted(str(f.relative_to(tmp)) + ("/" if f.is_dir() else "")
                   for f in tmp.rglob("*"))
    (tmp / marker).write_text(json.dumps({"evalmix_report": True,
                                          "complete": marker == REPORT_MARKER,
                                          "files": files}))


def _carry(old: Path, new: Path, user: Iterable[str]) -> None:
    """Put the user's files of ``old`` into ``new``: hard links (copies where the file
    system has none), symbolic links as links, empty folders as folders."""
    for rel in user:
        src, dst = old / rel, new / rel
        if rel.endswith("/"):
            dst.mkdir(parents=True, exist_ok=True)
            continue
        if dst.exists() or dst.is_symlink():
            if dst.is_symlink() or not src.exists() or not os.path.samefile(src, dst):
                raise EvalmixError(
                    f"{str(old / rel)!r} is not evalmix's file but the report writes a file "
                    "of that name; move it, or choose another folder")
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
            continue
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)


def swap_in(tmp: Path, out: Path, shown: str | os.PathLike[str]) -> None:
    """Rename the finished folder ``tmp`` to ``out``, keeping the user's files of an
    earlier report there (carried over before the swap, and once more after it for any
    file added in between); an earlier report is moved aside first and deleted after.
    Retries when another writer renames in between, so ``out`` is always one writer's
    complete report (or briefly absent). Errors name ``shown``, the user's own path."""
    try:
        _swap(tmp, out)
    except OSError as exc:
        raise EvalmixError(f"could not write the report to {str(shown)!r}: "
                           f"{exc.strerror or exc}") from None


def _swap(tmp: Path, out: Path) -> None:
    moved: list[Path] = []   # earlier reports moved aside, deleted once tmp is in place
    try:
        for _ in range(100):
            ours = report_files(out) if out.is_dir() else None
            if ours is not None:
                _carry(out, tmp, _user_files(out, ours))
            try:
                os.rename(tmp, out)
                break
            except OSError as e:
                if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                if not out.is_dir():
                    continue   # another writer moved it away since: rename again
            if ours is None and report_files(out) is not None:
                continue   # another writer's report landed since the first look: look again
            if ours is None and any(out.iterdir()):
                raise EvalmixError(f"{str(out)!r} was filled with files that are not an "
                                   "evalmix report while the report was being written; "
                                   "nothing was replaced")
            graveyard = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-"))
            moved.append(graveyard)
            try:
                os.rename(out, graveyard / "report")
            except FileNotFoundError:  # another writer moved it first
                continue
            # a file the user added since the first look comes along too
            _carry(graveyard / "report", tmp, _user_files(graveyard / "report", ours or set()))
        else:
            raise EvalmixError(f"could not rename the report into {str(out)!r}: other "
                               "writers kept replacing it")
    except BaseException:
        # put the last earlier report back where it was; the others stay hidden, unharmed
        for g in reversed(moved):
            if (g / "report").is_dir() and not out.exists():
                os.rename(g / "report", out)
                shutil.rmtree(g, ignore_errors=True)
            break
        raise
    for g in moved:
        shutil.rmtree(g, ignore_errors=True)
