"""The report: the tables printed at the end, and the JSON."""

from __future__ import annotations

import json
import os

from gpu_check_lib.bandwidth import human_bytes
from gpu_check_lib.common import log
from gpu_check_lib.sanitizer import sanitizer_verdict
from gpu_check_lib.values import DTYPES


def bandwidth_table(rows: list[dict]) -> str:
    header = (
        f"{'dtype':9s} {'size':>8s} {'mode':13s} {'kernel ms':>10s} {'copy ms':>9s} "
        f"{'kernel GB/s':>11s} {'copy GB/s':>10s} {'ratio':>6s}  target"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        target = ("yes" if r["meets_target"] else "NO") if r["target_applies"] else "-"
        lines.append(
            f"{r['dtype']:9s} {human_bytes(r['bytes']):>8s} {r['mode']:13s} "
            f"{r['kernel_ms_median']:10.4f} {r['copy_ms_median']:9.4f} {r['kernel_GBps']:11.1f} "
            f"{r['copy_GBps']:10.1f} {r['ratio']:6.3f}  {target}"
        )
    return "\n".join(lines)


def correctness_table(records: list[dict]) -> str:
    groups: dict[tuple[str, str], list[int]] = {}
    for r in records:
        ok_total = groups.setdefault((r["dtype"], r["case"]), [0, 0])
        ok_total[0] += r["ok"]
        ok_total[1] += 1
    lines = [f"{'dtype':9s} {'case':32s} {'ok/total':>9s}"]
    for (name, case), (ok, total) in sorted(
        groups.items(), key=lambda kv: (DTYPES.index(kv[0][0]) if kv[0][0] in DTYPES else len(DTYPES), kv[0][1])
    ):
        lines.append(f"{name:9s} {case:32s} {ok:>4d}/{total:<4d}{'' if ok == total else '  FAILED'}")
    return "\n".join(lines)


def write_json(report: dict, path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(report, f, indent=1, default=str)


def print_report(report: dict, reps: int, inner: int, json_path: str | None) -> None:
    """The tables and the verdict line, from the finished `report` (the JSON's content)."""
    records = report["correctness"]["records"]
    failed = report["correctness"]["failed"]
    sanitizers, bandwidth = report["sanitizer"], report["bandwidth"]
    log()
    log("== correctness (bitwise vs the CPU kernel; NaN matches NaN) ==")
    log(correctness_table(records))
    log()
    log("== compute-sanitizer on the small case ==")
    for s in sanitizers:
        log(f"{s['tool']:10s} {s['status']:22s} {' | '.join(s.get('summary', [])) or s.get('reason', '')}")
    if not sanitizers:
        log("(none run)")
    log()
    log(
        f"== bandwidth on {report['device']['name']}: bytes read + written, median of {reps} interleaved "
        f"reps x {inner} launches =="
    )
    log(bandwidth_table(bandwidth) if bandwidth else "(none measured)")
    if report["bandwidth_error"]:
        log(f"bandwidth measurement stopped early: {report['bandwidth_error']}")
    log(report["target"]["text"])
    log()
    log(
        f"correctness: {'all ' + str(len(records)) + ' checks passed' if not failed else f'{failed} of {len(records)} checks FAILED'}; "
        f"sanitizer: {sanitizer_verdict(sanitizers)}; elapsed {report['elapsed_s']} s"
        + (f"; JSON: {json_path}" if json_path else "")
    )
