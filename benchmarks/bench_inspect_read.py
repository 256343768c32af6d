"""Benchmark: reading a zipped Inspect log (``.eval``) whose members are much larger than
the zip (issue 27, item 4).

A log of N samples is made with inspect_ai's mock model; each sample's ``store`` is then
filled with many small records (as a real agent transcript's events and messages are:
many small JSON values, which compress well). Timed (median of 3, after a warm-up): inspect_ai reading the whole log
(``read_eval_log``, the baseline), inspect_ai's ``exclude_fields`` reader (what evalmix
used before: a pure-Python streaming parser), and ``evalmix.data.readers.read_inspect``
(header through inspect_ai, each sample member parsed whole and validated as
``EvalSample`` without the bulky fields). Target: evalmix within 1.5x of the baseline.

Usage: ``python benchmarks/bench_inspect_read.py [N]``; writes
``benchmarks/results/inspect_read.json``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parent / "results" / "inspect_read.json"
TARGET_RATIO = 1.5
RECORDS = 100_000   # small records in each sample's store


def _make_log(root: Path, n: int) -> Path:
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    def output(*_):
        out = ModelOutput.from_content(model="mockllm", content="the answer")
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return out

    task = Task(dataset=[Sample(input=f"q{i}", target="the", id=i) for i in range(n)],
                solver=generate(), scorer=match(location="begin"), name="big")
    log = inspect_eval(task, model=get_model("mockllm/m", custom_outputs=output),
                       log_dir=str(root), log_format="eval", display="none")[0]
    path = Path(log.location.removeprefix("file://"))
    store = {"steps": [{"step": i, "tool": "bash", "ok": i % 3 == 0, "cost": i * 0.5}
                       for i in range(RECORDS)]}
    big = path.with_name("big.eval")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(big, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename.startswith("samples/"):
                sample = json.loads(data)
                sample["store"] = store
                data = json.dumps(sample).encode()
            dst.writestr(info.filename, data)
    return big


def _time(fn, reps: int = 3) -> float:
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str]) -> int:
    from inspect_ai.log import read_eval_log

    from evalmix.data.readers import read_inspect
    from evalmix.data.readers.inspect_logs import _UNUSED

    n = int(argv[0]) if argv else 60
    with tempfile.TemporaryDirectory() as tmp:
        path = _make_log(Path(tmp), n)
        with zipfile.ZipFile(path) as z:
            unzipped = sum(i.file_size for i in z.infolist())
        zipped = path.stat().st_size
        base = _time(lambda: read_eval_log(str(path)))
        old = _time(lambda: read_eval_log(str(path), exclude_fields=_UNUSED), reps=1)
        ours = _time(lambda: read_inspect(path))
        table = read_inspect(path)
    result = {
        "samples": n, "zip_mb": round(zipped / 1e6, 2), "unzipped_mb": round(unzipped / 1e6, 1),
        "inspect_read_eval_log_s": round(base, 3),
        "inspect_exclude_fields_s": round(old, 3),
        "evalmix_read_inspect_s": round(ours, 3),
        "ratio_evalmix_to_inspect": round(ours / base, 2),
        "speedup_vs_exclude_fields": round(old / ours, 1),
        "rows": table.n_obs, "target_ratio": TARGET_RATIO,
        "load_average": os.getloadavg()[0],
    }
    print(json.dumps(result, indent=2))
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["ratio_evalmix_to_inspect"] <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
