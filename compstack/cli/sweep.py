"""``compstack sweep``: models x targets, locally or on Ray; the status matrix of a sweep."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from compstack.cli.common import BAD, compare_options
from compstack.cli.options import ModelFlags, RunFlags, model_options, run_options, targets_option
from compstack.core.errors import UserError

__all__ = ["SweepFlags", "cli_sweep", "sweep"]


@dataclass(frozen=True)
class SweepFlags:
    """The flags only ``sweep`` has.

    Attributes:
        baseline: the target speedups are against, or None (ort-cpu if swept, else the first).
        executor: ``local`` or ``ray``.
        ray_address: the Ray cluster to join, or None.
        n_jobs: jobs at a time, or None.
        resume: skip jobs the database already has.
        last, matrix: show the newest stored sweep (``matrix``: its status matrix).
        tier: also sweep every zoo model of this tier (``toy``, ``real``, ``all``), or None.
        out: write the sweep's dashboard (:func:`compstack.report.dashboard.write_dashboard`)
            to this ``.html`` file, or None.
        bundle_faults: write an explain bundle for each ``stack`` fault under this folder
            (:func:`compstack.sweep._bundles.bundle_sweep_faults`), or None.
        cache_max_size: ``--cache-max-size`` as given (``40G``), or None.
        cache_results: False with ``--no-cache-results``: run every job, even one whose
            judged row the store holds (:mod:`compstack.sweep._rowstore`).
    """

    baseline: str | None = None
    executor: str = "local"
    ray_address: str | None = None
    n_jobs: int | None = None
    resume: bool = False
    last: bool = False
    matrix: bool = False
    tier: str | None = None
    out: str | None = None
    bundle_faults: str | None = None
    cache_max_size: str | None = None
    cache_results: bool = True


def _check_results_db(path: Path, what: str) -> None:
    """Refuse, before :class:`ResultsDB` opens it (and so adds its tables), a file that is not a
    results database: unreadable, empty, not SQLite, malformed, or another program's database
    (no ``sweeps`` table). Read-only: nothing is written.

    Raises:
        UserError: one line naming ``path``.
    """
    import contextlib
    import sqlite3

    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as exc:
        raise UserError(f"{what}: cannot read {path} ({exc.strerror or exc})") from None
    if head != b"SQLite format 3\x00":
        raise UserError(f"{what}: {path} is not a results database (not an SQLite file)")
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error as exc:
        raise UserError(f"{what}: {path} is not a readable results database ({exc})") from None
    if "sweeps" not in tables:
        raise UserError(f"{what}: {path} is an SQLite file but not compstack's results database (no sweeps table)")


def cli_sweep(models: list[str], targets_spec: str, flags: SweepFlags, model: ModelFlags,
              run: RunFlags) -> dict[str, Any]:
    """Run (or, with ``--last``, read back) a sweep; returns its summary.

    Raises:
        UserError: bad input (one line, exit 2): models, targets, flags, Ray missing or
            unreachable.
    """
    from compstack import targets as registry
    from compstack.core.config import settings
    from compstack.core.results import ResultsDB
    from compstack.sweep._matrix import summarize, summary_of_db

    cfg = settings(cache_dir=model.cache_dir, db=run.db)
    if flags.out is not None:
        from compstack.cli.common import check_writable_file

        if not flags.out.strip():
            raise UserError(f"-o {flags.out!r}: an empty path; give the FILE.html to write")
        if Path(flags.out).is_dir():
            raise UserError(f"-o {flags.out}: a folder; give the FILE.html to write")
        check_writable_file(flags.out, "-o")  # before any work: a bad -o is one line, exit 2
    if flags.last or flags.matrix:
        used = "--last" if flags.last else "--matrix"
        if models or flags.tier:
            raise UserError(f"sweep {used}: give no models or --tier (it shows the newest stored sweep)")
        if flags.baseline and flags.out is None:
            raise UserError(f"sweep {used}: --baseline sets the dashboard's baseline; give -o FILE.html too "
                            "(the summary keeps the baseline the sweep ran with)")
        if not Path(cfg.db).is_file():  # reading must not leave an empty database behind
            raise UserError(f"sweep {used}: no results database at {cfg.db} (run `compstack sweep` first, or give --db)")
        _check_results_db(Path(cfg.db), f"sweep {used}")
        db = ResultsDB(cfg.db, cfg.db_busy_timeout_s)
        try:
            summary = summary_of_db(db)
        finally:
            db.close()
        return _with_dashboard(summary, cfg.db, flags)
    for flag, value in (("save_inputs", run.save_inputs), ("save_outputs", run.save_outputs)):
        if value:
            raise UserError(f"--{flag.replace('_', '-')}: not available with sweep")
    if flags.ray_address and flags.executor != "ray":
        raise UserError("--ray-address needs --executor ray")
    from compstack.frontends import zoo
    from compstack.sweep._models import expand_models

    tiered = [f"zoo:{n}" for n in zoo.names(available_only=True, tier=flags.tier)] if flags.tier else []
    specs = expand_models([*models, *tiered])
    targets = registry.resolve(targets_spec)
    baseline = flags.baseline or next((t for t in registry.with_role("baseline") if t in targets), targets[0])
    if baseline not in targets:
        raise UserError(f"--baseline {baseline}: not one of the swept targets ({', '.join(targets)})")
    from compstack.run.session import check_reference

    check_reference(run.reference, model.cache_dir)
    options = compare_options(targets, model, run)
    cap = _cache_cap(flags, options)
    executor = _executor(flags)
    from compstack.sweep._core import SweepOptions, run_sweep
    from compstack.sweep._display import SweepProgress

    try:
        with SweepProgress() as progress:  # stderr, also under --json
            swept = SweepOptions(specs, options, baseline, flags.resume, cap, flags.cache_results)
            result = run_sweep(swept, cfg, executor, progress)
    finally:
        executor.close()
    summary = summarize(result)
    if options.tuned:  # --tuned: what it meant per target (each row's flags.tuned_as), in the summary too
        summary["tuned"] = {"budget_s": options.tuned_budget_s, "targets": dict(options.tuned),
                            "defaults": "not run by a sweep: an untuned sweep of the same models gives them"}
    if flags.bundle_faults:
        summary["bundles"] = _bundles(summary["sweep_id"], cfg.db, Path(flags.bundle_faults), model, run)
    return _with_dashboard(summary, cfg.db, flags)


def _bundles(sweep_id: str, db: Path, folder: Path, model: ModelFlags, run: RunFlags) -> dict[str, dict[str, str]]:
    """``--bundle-faults``: an explain bundle per ``stack`` fault of the sweep, each named on
    stderr as it starts and ends (an explain takes up to 120 s)."""
    from compstack.cli.common import fault_explainer
    from compstack.sweep._bundles import bundle_sweep_faults

    def say(spec: str, target: str, where: str) -> None:
        what = "explaining (up to 120 s)" if where == "start" else where
        click.echo(f"bundle {spec} {target}: {what}", err=True)

    return bundle_sweep_faults(db, sweep_id, folder, fault_explainer(model, run), say)


def _with_dashboard(summary: dict[str, Any], db: Any, flags: SweepFlags) -> dict[str, Any]:
    """With ``-o``: write the dashboard of ``summary``'s sweep (``report --sweep -o``'s page)
    and record the file, its size and the baseline under ``summary["dashboard"]``."""
    if flags.out is None:
        return summary
    from compstack.report.dashboard import write_dashboard

    dash, size = write_dashboard(db, Path(flags.out), summary.get("sweep_id"), flags.baseline)
    summary["dashboard"] = {"path": flags.out, "bytes": size, "baseline": dash["baseline"]}
    return summary


def _cache_cap(flags: SweepFlags, options: Any) -> int | None:
    """``--cache-max-size`` in bytes (checked before any work), or None."""
    if flags.cache_max_size is None:
        return None
    from compstack.core.sizes import parse_size

    try:
        cap = parse_size(flags.cache_max_size)
    except ValueError as exc:
        raise UserError(f"--cache-max-size: {exc}") from None
    if options.latency is not None:
        raise UserError("--cache-max-size needs --no-latency (the latency phase reuses every model's artifacts)")
    if not options.cache:
        raise UserError("--cache-max-size: nothing is cached with --no-cache")
    return cap


def _executor(flags: SweepFlags) -> Any:
    if flags.executor == "ray":
        from compstack.sweep._ray import RayExecutor

        return RayExecutor(address=flags.ray_address, num_cpus=flags.n_jobs)
    from compstack.sweep._local import LocalExecutor

    return LocalExecutor(flags.n_jobs)


@click.command(short_help="Run models x targets (locally or on Ray); the status matrix of a sweep.")
@click.argument("models", nargs=-1)
@targets_option("Comma-separated targets or aliases.")
@click.option("--baseline", default=None,
              help="Target the speedups are against [default: ort-cpu if swept, else the first].")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="local: worker processes here; ray: each job a Ray task (pip install -e \".[ray]\").")
@click.option("--ray-address", default=None,
              help="Join this Ray cluster (auto, HOST:PORT) [default: start a local one].")
@click.option("--jobs", "n_jobs", type=click.IntRange(min=1), default=None,
              help="Jobs at a time in the compile/run phase (local; a local Ray cluster's CPUs) "
                   "[default: CPUs, at most 4].")
@click.option("--resume", is_flag=True,
              help="Skip jobs the database already has (same model, target, options, versions) "
                   "that ended ok or deterministically failed.")
@click.option("--last", is_flag=True, help="Show the newest stored sweep instead of running one.")
@click.option("--matrix", is_flag=True, help="The same as --last (its summary is the status matrix).")
@click.option("--tier", type=click.Choice(["toy", "real", "all"]), default=None,
              help="Also sweep every zoo model of this tier (compstack zoo --tier TIER lists them).")
@click.option("-o", "--output", "out", default=None, metavar="FILE.html",
              help="Write the sweep's dashboard here (as compstack report --sweep -o does).")
@click.option("--bundle-faults", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="For each row whose fault is the stack's, write an explain bundle under DIR/MODEL/TARGET "
                   "(the dashboard links it).")
@click.option("--cache-max-size", default=None, metavar="SIZE",
              help="Keep the store under SIZE (40G, 500M) as the sweep goes: after each model's last row, "
                   "delete the least recently used compiled artifacts and oracle entries, then model exports "
                   "(stored rows are kept). "
                   "Needs --no-latency.")
@click.option("--cache-results/--no-cache-results", default=True, show_default=True,
              help="Read a job's judged row from the store when an earlier sweep judged the same model, inputs, "
                   "target, options, versions and reference on this host with this compstack (as Bazel caches "
                   "test results); latency is always measured again. --no-cache-results runs every job.")
@model_options
@run_options
def sweep(models: tuple[str, ...], targets_spec: str, baseline: str | None, executor: str, ray_address: str | None,
          n_jobs: int | None, resume: bool, last: bool, matrix: bool, tier: str | None, out: str | None,
          bundle_faults: str | None, cache_max_size: str | None, cache_results: bool, model_flags: ModelFlags,
          run_flags: RunFlags) -> None:
    """Run every MODEL (zoo:NAME, zoo:*, file.onnx, a folder of .onnx, @list.txt) on every target.

    Exit status: 0 when every row is ok, unsupported or unavailable; 1 otherwise; 2 on bad input.

    Examples:

        \b
        compstack sweep zoo:mlp zoo:cnn --targets ort-cpu,tvm-llvm --no-latency
        compstack sweep --tier real --targets cpu --no-latency --resume -o dash.html
        compstack sweep --last --matrix
    """
    if last or matrix:
        _refuse_run_flags(click.get_current_context(), "--last" if last else "--matrix")
    flags = SweepFlags(baseline, executor, ray_address, n_jobs, resume, last, matrix, tier, out, bundle_faults,
                       cache_max_size, cache_results)
    summary = cli_sweep(list(models), targets_spec, flags, model_flags, run_flags)
    if run_flags.as_json:
        click.echo(json.dumps(summary, indent=1, default=str))
    else:
        from compstack.sweep import print_summary

        print_summary(summary)
        for target, means in (summary.get("tuned") or {}).get("targets", {}).items():
            click.echo(f"  --tuned {target}: {means}")
        if summary.get("tuned"):
            click.echo(f"  --tuned: default runs {summary['tuned']['defaults']}")
        if summary.get("dashboard"):
            d = summary["dashboard"]
            click.echo(f"wrote {d['path']} ({d['bytes'] / 1024:.1f} KiB): the dashboard, baseline {d['baseline']}")
    if any(c["status"] in BAD for cells in summary["matrix"].values() for c in cells.values()):
        sys.exit(1)


#: What applies to showing a stored sweep (--last): which one (--db), how (--matrix, --json), and
#: its dashboard (-o, --baseline). Every other flag runs a sweep.
_SHOW_FLAGS = frozenset({"last", "matrix", "db", "as_json", "out", "baseline"})


def _refuse_run_flags(ctx: click.Context, used: str) -> None:
    """Bad input: a flag given on the command line beside ``--last`` that only a run uses.

    Raises:
        UserError: names the first such flag (one line, exit 2); models and ``--tier`` get
            :func:`cli_sweep`'s own message.
    """
    from click.core import ParameterSource

    for param in ctx.command.params:
        if param.name in _SHOW_FLAGS or param.name == "tier" or not isinstance(param, click.Option):
            continue
        if ctx.get_parameter_source(param.name or "") is ParameterSource.COMMANDLINE:
            off = param.secondary_opts and ctx.params.get(param.name or "") is False  # --no-cache-results
            flag = param.secondary_opts[0] if off else param.opts[0]
            raise UserError(f"sweep {used}: {flag} applies to running a sweep, not to showing a stored one")


for _param in sweep.params:  # run_options' per-run files: sweep refuses them, so --help does not list them
    if isinstance(_param, click.Option) and _param.name in ("save_inputs", "save_outputs"):
        _param.hidden = True
