"""Run every benchmark script in this folder, one after another, in fresh processes.

Each ``bench_*.py`` prints its own timings and ratios against its baseline and writes
JSON to ``benchmarks/results/``. Usage: ``make bench`` or ``python benchmarks/run_all.py
[name ...]``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    scripts = sorted(HERE.glob("bench_*.py"))
    if argv:
        scripts = [s for s in scripts if any(a in s.stem for a in argv)]
    failed = 0
    for script in scripts:
        print(f"=== {script.name}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, str(script)], cwd=HERE.parent)
        print(f"=== {script.name}: exit {rc} in {time.perf_counter() - t0:.1f} s", flush=True)
        failed += rc != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
