"""Tables and JSON for ``compstack fusion`` and ``compstack profile`` (presentation only).

Units in every table: milliseconds per model run, bytes, GFLOP/s, GB/s (1e9 bytes/s).
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from rich.console import Console
from rich.table import Table

from compstack.analysis.fusion.analysis import MissedPair, NodeTime, PartitionDiff
from compstack.analysis.fusion.roofline import Peak, place
from compstack.analysis.kernels import SCHEMA_VERSION, GraphIndex
from compstack.core.sanitize import rich_text as escape  # model-sourced text: inert (core.sanitize)

__all__ = ["print_summary", "print_nodes", "print_partitions", "print_missed", "print_profile", "print_by_node",
           "to_json", "roofline_rows"]

_MAX_ROWS = 40


def _console() -> Console:
    c = Console()
    return c if c.is_terminal else Console(width=220)


def _short(text: str, width: int = 34) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _disp(kernel_id: str, width: int = 34) -> str:
    """A kernel id for a narrow column: IREE's ``<function>$async_`` prefix dropped."""
    return _short(re.sub(r"^[\w.\-]+\$async_", "", kernel_id), width)


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


def print_summary(rows: Sequence[Any], index: GraphIndex, title: str, console: Console | None = None) -> None:
    """One row per target: status, kernel counts by kind, coverage, unmapped nodes."""
    console = console or _console()
    console.print(f"[bold]{escape(title)}[/]  {len(index.nodes)} nodes, {len(index.compute)} compute nodes "
                  "(views and folded constants need no kernel)", highlight=False)
    table = Table()
    for col in ("target", "status", "kernels", "generated", "library", "copy", "coverage", "unmapped", "inferred"):
        table.add_column(col, justify="left" if col in ("target", "status") else "right", no_wrap=True)
    notes = []
    for r in rows:
        km = r.kernels
        if km is None:
            table.add_row(r.target, r.status, *["-"] * 7)
        else:
            kinds = km.kinds()
            inferred = len({n for k in km.kernels if k.kind != "copy" for n in k.inferred})
            table.add_row(r.target, r.status, str(len(km.kernels)), str(kinds["generated"]), str(kinds["library"]),
                          str(kinds["copy"]), f"{km.coverage:.1%}", str(len(km.unmapped)), str(inferred))
            notes.append(f"[bold]{r.target}[/]: mapping from {escape(km.source)}")
            notes.extend(f"[bold]{r.target}[/]: unmapped {escape(u.node)} ({escape(u.op)}): {escape(u.reason)}" for u in km.unmapped)
            notes.extend(f"[bold]{r.target}[/]: {escape(n)}" for n in km.notes)
        if r.error:
            notes.append(f"[bold]{r.target}[/]: {r.status} in {r.stage}: {escape(r.error.splitlines()[0][:300])}")
        notes.extend(f"[bold]{r.target}[/]: {escape(n)}" for n in r.notes)
    console.print(table)
    console.print("  inferred = nodes attributed to a kernel by position (no record of the stack names them)",
                  highlight=False)
    for n in notes:
        console.print("  " + n, highlight=False, soft_wrap=True)


def print_nodes(rows: Sequence[Any], index: GraphIndex, console: Console | None = None) -> None:
    """Source compute nodes x targets: the kernel (execution index and name) computing each;
    nodes sharing a kernel on a target were fused there. ``*``: attributed by position."""
    console = console or _console()
    maps = [(r.target, r.kernels) for r in rows if r.kernels is not None]
    if not maps:
        return
    table = Table(title="kernel of each source node (#execution index, name; +N: N more kernels; * = by position)")
    table.add_column("node", no_wrap=True)
    table.add_column("op", no_wrap=True)
    for t, _ in maps:
        table.add_column(t, no_wrap=True)
    cells: dict[str, dict[str, list[str]]] = {}
    for t, km in maps:
        for i, k in enumerate(km.kernels):
            if k.kind == "copy":
                continue
            for n in k.nodes:
                mark = "*" if n in k.inferred else ""
                cells.setdefault(n, {}).setdefault(t, []).append(f"#{i} {_disp(k.id, 22)}{mark}")

    def cell(items: list[str]) -> str:
        return items[0] + (f" +{len(items) - 1}" if len(items) > 1 else "")

    for n in index.compute:
        table.add_row(escape(_short(n, 40)), escape(_short(index.op(n), 18)),
                      *[escape(cell(cells.get(n, {}).get(t, ["-"]))) for t, _ in maps])
    console.print(table)


def print_partitions(diff: PartitionDiff, console: Console | None = None) -> None:
    """Fusion groups not formed by every target."""
    console = console or _console()
    console.print(f"[bold]fusion groups[/]: {diff.common} formed by all of {', '.join(diff.targets)}; "
                  f"{len(diff.groups)} formed by some only", highlight=False)
    for g in diff.groups[:_MAX_ROWS]:
        nodes = ", ".join(g["nodes"])
        by = ", ".join(f"{t} ({', '.join(_disp(i, 60) for i in ids)})" for t, ids in g["formed_by"].items())
        split = "; ".join(f"{t}: {', '.join(_disp(i, 60) for i in ids) or 'no kernel'}" for t, ids in g["split"].items())
        console.print(f"  {{{escape(nodes)}}}\n      one kernel on {escape(by)}\n"
                      f"      other partition on {escape(split)}", highlight=False, soft_wrap=True)
    if len(diff.groups) > _MAX_ROWS:
        console.print(f"  ... {len(diff.groups) - _MAX_ROWS} more (--json lists all)", highlight=False)


def print_missed(pairs: Sequence[MissedPair], console: Console | None = None) -> None:
    """Producer -> consumer pairs fused by some targets and split by others."""
    console = console or _console()
    table = Table(title="missed fusions: producer -> consumer in one kernel on some targets, in two on others")
    for col in ("producer -> consumer", "tensor", "bytes", "fused by", "split by"):
        table.add_column(col, justify="right" if col == "bytes" else "left")
    for p in pairs[:_MAX_ROWS * 2]:
        table.add_row(escape(f"{p.producer} -> {p.consumer}"), escape(p.tensor),
                      "-" if p.bytes is None else f"{p.bytes:,}", escape(", ".join(p.fused_by)),
                      escape(", ".join(p.split_by)))
    console.print(table)
    console.print(f"  {len(pairs)} pairs; bytes = size of the intermediate tensor the fused target does not "
                  "write to memory (the split target writes it and reads it back)", highlight=False)


def roofline_rows(row: Any, peak: Peak | None) -> dict[str, dict[str, Any]]:
    """Kernel id -> :func:`compstack.analysis.fusion.roofline.place` result, for a profiled row;
    empty for an inconsistent profile (:meth:`compstack.analysis.kernels.KernelProfile.inconsistencies`):
    throughput from kernel times that do not describe the runs would be made up."""
    if peak is None or row.profile is None or row.kernels is None or row.flags.get("imported"):
        return {}
    if not row.profile.consistent:
        return {}
    out = {}
    for kt in row.profile.kernels:
        try:
            k = row.kernels.kernel(kt.id)
        except KeyError:
            continue
        out[kt.id] = place(k.flops, k.bytes, kt.median, peak)
    return out


def print_profile(row: Any, peak: Peak | None, console: Console | None = None) -> None:
    """One target's per-kernel times, roofline placement, and the sum beside end-to-end."""
    console = console or _console()
    prof, km = row.profile, row.kernels
    if prof is None:
        return
    roof = roofline_rows(row, peak)
    total = prof.kernel_sum["median"] or 1.0
    table = Table(title=f"{row.target}: per-kernel time ({escape(prof.profiler)}; {prof.runs} runs after "
                        f"{prof.warmup} warm-up)")
    cols = ("#", "kernel", "kind", "calls", "median ms", "p10 ms", "p90 ms", "cv", "share", "GFLOP/s", "GB/s",
            "bound", "of roof", "source nodes")
    for col in cols:
        table.add_column(col, justify="left" if col in ("kernel", "kind", "bound", "source nodes") else "right",
                         no_wrap=col != "source nodes")
    order = {k.id: i for i, k in enumerate(km.kernels)} if km else {}
    for kt in prof.kernels:
        k = km.kernel(kt.id) if km and kt.id in order else None
        r = roof.get(kt.id, {})
        nodes = ", ".join(k.nodes[:4]) + (f" (+{len(k.nodes) - 4})" if k and len(k.nodes) > 4 else "") if k else ""
        table.add_row(str(order.get(kt.id, "")), escape(_disp(kt.id, 48)), k.kind if k else "", str(kt.calls),
                      _ms(kt.median), _ms(kt.p10), _ms(kt.p90), "-" if kt.cv is None else f"{kt.cv:.0%}",
                      f"{kt.median / total:.1%}",
                      _num(r.get("gflops")), _num(r.get("gbs")), r.get("bound") or "-",
                      _of_roof(r), escape(nodes))
    console.print(table)
    e2e = prof.end_to_end
    ratio = prof.sum_over_e2e
    cv = prof.kernel_sum.get("cv")
    stat = prof.kernel_sum.get("of", "median")  # "mean" where the profiler gives per-kernel means (OpenVINO)
    what = "median" if stat == "median" else "sum of the kernels' means"
    line = f"  sum of kernel times: {what} {prof.kernel_sum['median']:.4f} ms/run" + \
        (f" (cv {cv:.0%})" if cv is not None else "")
    e2e_v = e2e.get(stat) if e2e and e2e.get(stat) is not None else (e2e or {}).get("median")
    line += (f"; end-to-end (profiler off): {stat} {e2e_v:.4f} ms (cv {e2e['cv']:.0%}, {e2e['runs']} runs)"
             if e2e else "; end-to-end: not measured")
    if ratio is not None:
        line += f"; kernel sum / end-to-end = {ratio:.2f}"
    console.print(line, highlight=False, soft_wrap=True)
    if prof.profiled_run:
        run_ratio = prof.sum_over_profiled_run
        run_v = prof.profiled_run.get(stat) if prof.profiled_run.get(stat) is not None else prof.profiled_run["median"]
        console.print(f"  profiled run (profiler on): {stat} {run_v:.4f} ms"
                      + (f"; kernel sum / profiled run = {run_ratio:.2f}" if run_ratio is not None else ""),
                      highlight=False)
    problems = prof.inconsistencies()
    for p in problems:
        console.print(f"  [bold red]inconsistent profile[/]: {escape(p)}", highlight=False, soft_wrap=True)
    if problems and peak is not None and not row.flags.get("imported"):
        console.print("  no throughput or roofline shown: the kernel times do not describe the model's runs "
                      "(rerun on an idle machine, or with fewer threads)", highlight=False, soft_wrap=True)
    if prof.other:
        top = sorted(prof.other.items(), key=lambda kv: -kv[1])[:6]
        console.print("  not kernels (runtime calls): " + ", ".join(f"{escape(n)} {v:.4f} ms" for n, v in top),
                      highlight=False, soft_wrap=True)
    if peak is not None and not row.flags.get("imported") and not problems:
        best = peak.method.get("best", {}) if peak.method else {}
        console.print(f"  roofline: peak {peak.gflops:.1f} GFLOP/s (float32 GEMM, {best.get('gemm', 'numpy')}), "
                      f"{peak.gbs:.1f} GB/s (copy, {best.get('copy', 'numpy')}), ridge {peak.ridge:.1f} FLOP/byte; "
                      "GB/s from compulsory bytes (a lower bound)", highlight=False, soft_wrap=True)
        for kid, r in roof.items():
            if r.get("above_peak"):
                console.print(f"  {escape(_disp(kid, 48))}: {'measurement error: ' if r['above_peak'] == 'measurement-error' else ''}"
                              f"{escape(r['explanation'])}", highlight=False, soft_wrap=True)
    for n in prof.notes:
        console.print(f"  {escape(n)}", highlight=False)


def _of_roof(r: dict[str, Any]) -> str:
    """The share of the roof, or why there is none (never above 100 %)."""
    if r.get("above_peak") == "measurement-error":
        return "[red]above peak![/]"
    if r.get("above_peak") == "from-cache":
        return "cache"
    return "-" if r.get("fraction") is None else f"{r['fraction']:.1%}"


def _num(x: float | None) -> str:
    return "-" if x is None else (f"{x:.3g}" if x < 100 else f"{x:.0f}")


def print_by_node(times: Sequence[NodeTime], targets: Sequence[str], console: Console | None = None) -> None:
    """Each source node's time on each target (ms per run); † = split evenly."""
    console = console or _console()
    table = Table(title="time per source node, ms per run (a kernel's time split by FLOPs; † = evenly: FLOPs "
                        "unknown or zero)")
    table.add_column("node", no_wrap=True)
    table.add_column("op", no_wrap=True)
    for t in targets:
        table.add_column(t, justify="right", no_wrap=True)
    for row in times:
        cells = []
        for t in targets:
            v = row.ms.get(t)
            mark = "†" if row.method.get(t) in ("even", "mixed") else ""
            cells.append("-" if v is None else f"{v:.4f}{mark}")
        table.add_row(escape(_short(row.node, 44)), escape(row.op), *cells)
    sums = [sum(r.ms.get(t) or 0.0 for r in times) for t in targets]
    table.add_row("[bold]sum[/]", "", *[f"{s:.4f}" for s in sums])
    console.print(table)


def to_json(model: dict[str, Any], rows: Sequence[Any], diff: PartitionDiff | None,
            missed: Sequence[MissedPair] | None, times: Sequence[NodeTime] | None, peak: Peak | None) -> dict[str, Any]:
    """Everything as one JSON document (``schema_version`` 1)."""
    targets = []
    for r in rows:
        item = r.to_json()
        if r.profile is not None:
            item["roofline"] = roofline_rows(r, peak)
        targets.append(item)
    return {"schema_version": SCHEMA_VERSION, "model": model, "peak": peak.to_json() if peak else None,
            "targets": targets, "partitions": diff.to_json() if diff else None,
            "missed": [p.to_json() for p in missed] if missed is not None else None,
            "by_node": [t.to_json() for t in times] if times is not None else None}
