"""Check every CUDA target on an NVIDIA GPU: one table of model x target.

Runs ``compstack compare MODEL --targets cuda --json`` (the ``cuda`` alias expands to every
CUDA target in compare's default set) for ``zoo:cnn`` and ``zoo:bert``, plus
``compstack profile MODEL --target T`` for each target when that command exists (it is
checked with ``compstack profile --help``), and prints one table:

    model  target  status  max_abs_err  median_ms  compile_s  profile

``max_abs_err`` is the largest ``max |target - reference|`` over the model's outputs;
``median_ms`` the median latency in milliseconds; ``compile_s`` lower + compile in seconds
(from the cache record when the artifact was cached). A row that did not run shows its
status and the first words of its error.

Without an NVIDIA GPU (``nvidia-smi`` lists none, ``torch.cuda`` sees none, and no CUDA
target says it can run) it prints one line saying so and exits 0.

Usage: python benchmarks/gpu_check.py [--models zoo:cnn,zoo:bert] [--timeout 1800]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from typing import Any

CLI = [sys.executable, "-m", "compstack.cli"]


def _run(argv: list[str], timeout: float | None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"timed out after {timeout} s")


def gpu_evidence() -> str:
    """Why we think an NVIDIA GPU is here, or ``""`` when nothing says so."""
    if shutil.which("nvidia-smi"):
        proc = _run(["nvidia-smi", "-L"], 60)
        gpus = [ln for ln in proc.stdout.splitlines() if ln.startswith("GPU ")]
        if proc.returncode == 0 and gpus:
            return f"nvidia-smi: {gpus[0]}" + (f" (+{len(gpus) - 1} more)" if len(gpus) > 1 else "")
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    if _run([sys.executable, "-c", probe], 300).returncode == 0:
        return "torch.cuda.is_available()"
    proc = _run([*CLI, "targets", "--json"], 600)
    try:
        runnable = [r["name"] for r in json.loads(proc.stdout) if r["device"] == "cuda" and r["runs"]]
    except (ValueError, KeyError, TypeError):
        runnable = []
    return f"compstack targets: {', '.join(runnable)} can run" if runnable else ""


def has_profile_command() -> bool:
    """True when this compstack has a ``profile`` command."""
    return _run([*CLI, "profile", "--help"], 120).returncode == 0


def compare_rows(model: str, timeout: float) -> list[dict[str, Any]]:
    """One dict per CUDA target from ``compstack compare MODEL --targets cuda --json``."""
    # each target's job is limited by compare's own --timeout; the whole run is not
    proc = _run([*CLI, "compare", model, "--targets", "cuda", "--json", "--timeout", str(timeout)], None)
    try:
        results = json.loads(proc.stdout)["results"]
    except (ValueError, KeyError):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return [{"model": model, "target": "(compare)", "status": f"exit {proc.returncode}", "error": tail}]
    rows = []
    for r in results:
        errs = [o["max_abs_err"] for o in r.get("outputs", []) if o.get("max_abs_err") is not None]
        rows.append({"model": model, "target": r["target"], "status": r["status"], "error": r.get("error", ""),
                     "max_abs_err": max(errs) if errs else None,
                     "median_ms": (r.get("latency_ms") or {}).get("median"), "compile_s": r.get("compile_s")})
    return rows


def profile_status(model: str, target: str, timeout: float) -> str:
    """``ok`` or ``exit N: last stderr line`` for ``compstack profile MODEL --target TARGET``."""
    proc = _run([*CLI, "profile", model, "--target", target], timeout)
    if proc.returncode == 0:
        return "ok"
    return f"exit {proc.returncode}: {(proc.stderr.strip().splitlines() or [''])[-1][:60]}"


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(rows: list[dict[str, Any]]) -> None:
    head = f"{'model':<10} {'target':<16} {'status':<12} {'max_abs_err':>11} {'median_ms':>10} {'compile_s':>10}  profile"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['model']:<10} {r['target']:<16} {r['status']:<12} {_fmt(r.get('max_abs_err'), '.2e'):>11} "
              f"{_fmt(r.get('median_ms'), '.3f'):>10} {_fmt(r.get('compile_s'), '.2f'):>10}  {r.get('profile', '-')}")
        if r["status"] not in ("ok", "mismatch") and r.get("error"):
            print(f"{'':<11}{r['error'][:110]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="zoo:cnn,zoo:bert", help="comma-separated models")
    ap.add_argument("--timeout", type=float, default=1800, help="limit of one target's job, seconds")
    args = ap.parse_args(argv)
    evidence = gpu_evidence()
    if not evidence:
        print("gpu_check: no NVIDIA GPU here (nvidia-smi lists none, torch.cuda sees none, no CUDA target can run); "
              "nothing checked")
        return 0
    print(f"gpu_check: {evidence}")
    profile = has_profile_command()
    rows = []
    for model in (m.strip() for m in args.models.split(",") if m.strip()):
        for row in compare_rows(model, args.timeout):
            if profile and row["status"] == "ok":
                row["profile"] = profile_status(model, row["target"], args.timeout)
            rows.append(row)
    print_table(rows)
    if not profile:
        print("(no `compstack profile` command in this compstack: profile column not run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
