"""The ``fuzz`` command: flags to a campaign, progress lines, the printed record.

``-o DIR`` receives one bundle per unique finding (``DIR/NNNN``, written by
:func:`compstack.explain.explain`) and ``DIR/campaign.json`` (the record, with the
campaign's id in the results database), which ``--report DIR`` reads back.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import click

from compstack.cli.common import probe_dir
from compstack.cli.options import Finite, db_option, json_option, seed_option, targets_option, timeout_option
from compstack.core.errors import UserError

__all__ = ["fuzz", "fuzz_command", "report_command", "replay_command", "parse_dtypes"]


def parse_dtypes(text: str | None) -> list[str]:
    """``float16,int8`` -> names; unknown names are one error naming them."""
    from compstack.fuzz.specs import ALL_DTYPES

    if not text:
        return list(ALL_DTYPES)
    names = [d.strip() for d in text.split(",") if d.strip()]
    bad = [d for d in names if d not in ALL_DTYPES]
    if bad or not names:
        raise UserError(f"--dtypes {text!r}: unknown {', '.join(bad) or 'empty list'}; "
                        f"choose from {', '.join(ALL_DTYPES)}")
    return names


def fuzz_command(opts: Any, db: Path, update_known: bool = False, as_json: bool = False,
                 versions: dict[str, list[str]] | None = None) -> int:
    """Run the campaign, print progress and the record; exit status 0 (1 when a new,
    not known, finding of kind other than undefined was made). ``versions``: ``--versions
    RANGE`` (:func:`compstack.cli.bisect_versions.version_ranges`): each bundled finding of
    a stack with releases is bisected over them, the answer in its ISSUE.md and in the
    finding's ``versions``."""
    from rich.console import Console

    from compstack.core.sanitize import rich_text as escape  # model-sourced text: inert
    from compstack.fuzz.campaign import run_campaign
    from compstack.fuzz.store import FuzzStore

    con = Console(stderr=True, highlight=False)
    store = FuzzStore(db)
    try:
        record = run_campaign(opts, None if as_json else (lambda s: con.print(escape(s))), store)
    finally:
        store.close()
    record["db"] = str(db)
    if versions and not record.get("interrupted"):
        _bisect_findings(record, versions, opts.timeout_s, None if as_json else (lambda s: con.print(escape(s))))
    if opts.out_dir:
        Path(opts.out_dir).mkdir(parents=True, exist_ok=True)
        (Path(opts.out_dir) / "campaign.json").write_text(json.dumps(record, indent=1, default=str))
    if update_known:
        _update_known(record)
    if as_json:
        print(json.dumps(record, indent=1, default=str))
    else:
        print_record(record)
    if record.get("interrupted"):
        con.print("compstack: interrupted; the record so far is above" + (f" and in {opts.out_dir}/campaign.json"
                                                                          if opts.out_dir else ""))
        return 130
    if record["findings"] and not opts.out_dir:
        con.print(f"bundles: {record['out_dir']} (give -o DIR to choose the folder)")
    return 1 if any(not f["known"] and f["label"] != "undefined" for f in record["findings"]) else 0


def _bisect_findings(record: dict[str, Any], versions: dict[str, list[str]], timeout_s: float, say: Any) -> None:
    """``fuzz --versions``: bisect-versions on each finding's bundle whose stack has releases."""
    from compstack.cli.bisect_versions import bisect_bundle

    for f in record["findings"]:
        base = f["target"].partition("@")[0]
        if not f.get("bundle") or base not in versions:
            continue
        if say:
            say(f"finding {f['number']:04d}: bisecting {base} over {len(versions[base])} release(s)")
        try:
            f["versions"] = bisect_bundle(Path(f["bundle"]), base, versions[base], timeout_s=timeout_s, say=say)
        except UserError as exc:  # an unreadable bundle is that finding's answer; the others go on
            f["versions"] = {"answer": "error", "summary": str(exc)}
        if say:
            say(f"finding {f['number']:04d}: {f['versions']['summary']}")


def _update_known(record: dict[str, Any]) -> None:
    from compstack.fuzz.signature import write_known

    by: dict[str, list[tuple[str, str]]] = {}
    for f in record["findings"]:
        by.setdefault(f["target"], []).append((f["signature"], f["graph"][:120]))
    for t, rows in by.items():
        write_known(t, record["versions"].get(t, "unknown"), rows)


def print_record(record: dict[str, Any]) -> None:
    """The campaign as rich tables: outcomes per target and stage, findings."""
    from rich.table import Table

    from compstack.core.sanitize import rich_text as escape  # model-sourced text: inert
    from compstack.report.tables import stdout_console

    con = stdout_console(highlight=False)  # a pipe gets the whole table, not 80 columns
    mins = max(record["seconds"] / 60, 1e-9)
    con.print(f"campaign {record.get('campaign', '?')}: {record['graphs']} graphs in {record['seconds']:.0f} s "
              f"= [bold]{record['graphs_per_min']:.1f} graphs/min[/] end to end ({record['rejected']} generator rejects)")
    phases = record.get("phases")
    if phases:
        con.print(f"  generation {phases['generate_s']:.0f} s ({phases['generate_graphs_per_min']:.1f} graphs/min), "
                  f"then reduction {phases['reduce_s']:.0f} s")
    t = Table(title="outcomes per target (key: verdict or status@stage)")
    for col in ("target", "version", "outcomes", "seconds per stage"):
        t.add_column(col, overflow="fold")  # wrap text, never elide a figure
    for target, counts in record["outcomes"].items():
        secs = record["stage_seconds"].get(target, {})
        t.add_row(target, str(record["versions"].get(target, "-")),
                  escape(", ".join(f"{k} {v}" for k, v in sorted(counts.items()))),
                  ", ".join(f"{k} {v:.1f}" for k, v in secs.items()))
    con.print(t)
    own = record.get("own_seconds", {})
    if own:
        con.print("compstack's own time: " + ", ".join(f"{k} {v:.1f} s" for k, v in own.items())
                  + f"; {record['graphs'] / mins:.1f} graphs/min overall")
    title = f"{len(record['findings'])} unique finding(s)"
    if con.width < 120:  # a narrow terminal: one block per finding, its text wrapped on words, nothing cut
        con.print(f"[bold]{title}[/]")
        for f in record["findings"]:
            con.print(f"[bold]{f['number']:04d}[/] {escape(f['target'])} {escape(f['stage'])} {escape(f['kind'])} "
                      f"{escape(f['label'])}, {'known' if f['known'] else 'new'}, x{f['repeats']}")
            con.print(f"  reduced graph: {escape(f['graph'])}")
            if f["attribution"]:
                con.print(f"  attribution: {escape(f['attribution'])}")
        return
    ft = Table(title=title)
    for col in ("#", "target", "stage", "kind", "label", "known", "repeats", "reduced graph", "attribution"):
        ft.add_column(col, overflow="fold")  # wrap text, never cut it
    for f in record["findings"]:
        ft.add_row(f"{f['number']:04d}", f["target"], f["stage"], f["kind"], f["label"],
                   "known" if f["known"] else "new", str(f["repeats"]), escape(f["graph"]),
                   escape(f["attribution"] or ""))
    con.print(ft)


def report_command(folder: str, db_override: Path | None, as_json: bool = False) -> int:
    """Print the campaign whose findings are in ``folder`` (from the results database),
    as rich tables or, with ``as_json``, as the JSON record."""
    from compstack.fuzz.store import FuzzStore

    path = Path(folder) / "campaign.json"
    if not path.is_file():
        raise UserError(f"--report {folder}: no campaign.json (not a `compstack fuzz -o` folder)")
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"--report {folder}: unreadable campaign.json ({exc})") from None
    db = db_override or Path(record.get("db", ""))
    if db.is_file() and record.get("campaign"):
        store = FuzzStore(db)
        try:
            row = next((c for c in store.campaigns() if c["id"] == record["campaign"]), None)
            if row is not None:
                record.update(graphs=row["graphs"], rejected=row["rejected"], graphs_per_min=row["graphs_per_min"],
                              outcomes=json.loads(row["outcomes"] or "{}"),
                              stage_seconds=json.loads(row["stage_seconds"] or "{}"))
                stored = store.findings(record["campaign"])
                if stored:
                    record["findings"] = stored
        finally:
            store.close()
    if as_json:
        print(json.dumps(record, indent=1, default=str))
    else:
        print_record(record)
    return 0


def replay_command(folder: str, timeout_s: float, as_json: bool, trust_flags: bool = False) -> int:
    """Rerun a finding's bundle (``compstack explain --replay``): 0 reproduces, 1 not."""
    from compstack.cli.explain import replay_command as explain_replay

    return explain_replay(folder, as_json, timeout_s, trust_flags)


@click.command(short_help="Fuzz the stacks with random valid ONNX graphs; dedup, reduce and bundle findings.")
@targets_option("Targets or aliases to fuzz.")
@click.option("--time", "budget", default="10m", show_default=True, help="Campaign budget (90s, 10m, 1h).")
@click.option("--graphs", "max_graphs", type=click.IntRange(min=1), help="Stop after this many graphs.")
@seed_option("Campaign seed (graph i is reproducible).")
@click.option("--ops", help="Regex matched against whole op types (e.g. 'Conv|Resize|Pad') [default: all specs].")
@click.option("--max-nodes", type=click.IntRange(1, 64), default=6, show_default=True, help="Nodes per graph, at most.")
@click.option("--dtypes", help="Comma-separated dtypes of inputs [default: all of float32,float16,bfloat16,"
                               "int8,int32,int64,bool].")
@click.option("--allow-ub", is_flag=True, help="Keep inputs with undefined behaviour; label such findings undefined.")
@click.option("--no-reduce", is_flag=True, help="Record findings without reducing and bundling them.")
@click.option("--equivalence", type=Finite(0, 1), default=0.5, show_default=True,
              help="Share of graphs also run as a semantically equal rewrite.")
@timeout_option(60, "Limit of one evaluation, s.")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Where evaluations run: local (one graph at a time here, its targets side by side) or ray "
                   "(one Ray actor per worker).")
@click.option("--jobs", "n_jobs", type=click.IntRange(min=1), default=None,
              help="local: targets of one graph evaluated at once, each in its own worker [default: the CPUs, at "
                   "most the targets]; ray: actors evaluating graphs [default: the cluster's CPUs].")
@click.option("--ray-address", default=None,
              help="Join this Ray cluster (auto, HOST:PORT) [default: start a local one].")
@click.option("--symbolic-shapes", type=Finite(0, 1), default=0.2, show_default=True,
              help="Share of graphs whose inputs get symbolic dims (dim_param).")
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False), help="Bundles of the findings (DIR/NNNN).")
@click.option("--report", "report_dir", type=click.Path(file_okay=False), help="Print the campaign of a -o folder.")
@click.option("--replay", "replay_dir", type=click.Path(file_okay=False), help="Rerun one finding's bundle.")
@click.option("--trust-bundle-flags", is_flag=True,
              help="With --replay: also apply bundle flags the stacks' replay allowlists refuse.")
@click.option("--update-known", is_flag=True, help="Add this campaign's findings to compstack/fuzz/known/.")
@click.option("--versions", "versions", metavar="FIRST..LAST", help="Bisect each bundled finding over its stack's "
              "releases in this range (bisect-versions); the answer goes into its ISSUE.md.")
@db_option()
@json_option("Print the record as JSON on stdout, nothing else.")
def fuzz(targets_spec: str, budget: str, max_graphs: int | None, seed: int, ops: str | None, max_nodes: int,
         dtypes: str | None, allow_ub: bool, no_reduce: bool, equivalence: float, timeout: float, executor: str,
         n_jobs: int | None, ray_address: str | None, symbolic_shapes: float, out_dir: str | None, report_dir: str | None, replay_dir: str | None, trust_bundle_flags: bool,
         update_known: bool, versions: str | None, db: str | None, as_json: bool) -> None:
    """Generate valid-by-construction ONNX graphs over the op specs, run them on every
    target against the float64 reference (noise floor), check crashes per stage and
    equivalent rewrites, dedup findings by signature, reduce and bundle each unique one.

    Exit status: 0 nothing new (or --report/--replay reproduces), 1 a new finding
    (--replay: does not reproduce), 2 bad input, 130 interrupted (Ctrl-C: the record so far
    is printed and kept, the failures not yet reduced are bundled as found).

    Examples:

        \b
        compstack fuzz --targets cpu --time 10m -o findings/
        compstack fuzz --targets tvm-llvm,iree-llvm-cpu --ops 'Conv|Resize|Pad' --max-nodes 8 --seed 7
        compstack fuzz --replay findings/0007/
    """
    from compstack import targets as registry
    from compstack.cli.explain import parse_duration
    from compstack.core import config

    if report_dir:
        sys.exit(report_command(report_dir, Path(db) if db else None, as_json))
    if replay_dir:
        sys.exit(replay_command(replay_dir, timeout, as_json, trust_bundle_flags))
    if executor != "ray" and ray_address:
        raise UserError("--ray-address: only with --executor ray")
    if ops:
        try:
            re.compile(ops)
        except re.error as exc:
            raise UserError(f"--ops {ops!r}: not a regular expression ({exc})") from None
    from compstack.fuzz.campaign import CampaignOptions

    opts = CampaignOptions(registry.resolve(targets_spec), seed, parse_duration(budget, "--time"),
                           max_graphs, max_nodes, parse_dtypes(dtypes), ops,
                           allow_ub, Path(out_dir) if out_dir else None, timeout,
                           equivalence, not no_reduce, symbolic_shapes=symbolic_shapes,
                           executor=executor, workers=n_jobs if executor == "ray" else None, ray_address=ray_address,
                           parallel=(n_jobs or os.cpu_count() or 1) if executor != "ray" else 1)
    if opts.out_dir:
        probe_dir(opts.out_dir, f"-o {opts.out_dir}: folder not writable")
    sys.exit(fuzz_command(opts, config.settings(db=db).db, update_known, as_json,
                          _ranges(versions, no_reduce, opts.targets)))


def _ranges(versions: str | None, no_reduce: bool, targets: list[str]) -> dict[str, list[str]] | None:
    """``--versions RANGE``: each versioned target's releases in it (None: no flag); bad ones exit 2."""
    if versions is None:
        return None
    if no_reduce:
        raise UserError(f"--versions {versions}: not with --no-reduce (the findings get no bundle to bisect)")
    from compstack.cli.bisect_versions import version_ranges

    return version_ranges(targets, versions)
