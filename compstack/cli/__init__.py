"""The ``compstack`` command line.

Bad input ends in one line on stderr (``compstack: error: ...``) and exit status 2;
a stack's failure is a row of the result table, never an exit. ``--json`` puts only
JSON on stdout. No compiler stack is imported until a command needs one.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Sequence

import click

from compstack.core.errors import CompstackError, UserError
from compstack.core.procs import run_tempdir

__all__ = ["main", "cli"]


class _Finite(click.ParamType):
    """A finite float within [lo, hi] (click's FloatRange lets NaN and inf through)."""

    name = "float"

    def __init__(self, lo: float = float("-inf"), hi: float = float("inf"), lo_open: bool = False) -> None:
        self.lo, self.hi, self.lo_open = lo, hi, lo_open

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        import math

        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(x) or x < self.lo or x > self.hi or (self.lo_open and x == self.lo):
            lo = f"> {self.lo:g}" if self.lo_open else f">= {self.lo:g}"
            self.fail(f"{value} is not a finite number {lo} and <= {self.hi:g}", param, ctx)
        return x


def _fail(message: str) -> None:
    click.echo(f"compstack: error: {message}", err=True)
    sys.exit(2)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that every ``finally`` runs (workers are
    killed, temporary folders removed, the run is marked ``interrupted``)."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def _interrupted(exc: BaseException) -> None:
    """One line and the shell's status for a signal: 130 (SIGINT), 143 (SIGTERM)."""
    term = isinstance(exc, Terminated) or isinstance(exc.__cause__ or exc.__context__, Terminated)
    click.echo(f"compstack: {'terminated (SIGTERM)' if term else 'interrupted'}", err=True)
    sys.exit(143 if term else 130)


class _Group(click.Group):
    """Turns :class:`CompstackError` into one line and exit status 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CompstackError as exc:
            _fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        except KeyboardInterrupt as exc:
            _interrupted(exc)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="compstack")
def cli() -> None:
    """Compare ML compiler stacks on one model: numerics, compile time, latency, IR."""
    from compstack.core.tools import tool_settings

    tool_settings()  # a bad COMPSTACK_SAVE_TEMPS fails here, before any job


# ---------------------------------------------------------------------------------------
# shared options


def _common_model_options(f: Any) -> Any:
    opts = [
        click.option("--seed", type=int, default=0, show_default=True, help="Seed of generated inputs."),
        click.option("--inputs", "inputs_file", type=click.Path(dir_okay=False),
                     help="Input arrays by name (.npz) instead of generated ones."),
        click.option("--val-range", "val_ranges", multiple=True, metavar="NAME:LO,HI",
                     help="Value range of a generated input (repeatable), as in Polygraphy."),
        click.option("--input-shape", "input_shapes", multiple=True, metavar="NAME:D0xD1...",
                     help="Shape for an input with dynamic dims (repeatable)."),
        click.option("--opset", type=click.IntRange(min=1), default=None, metavar="N",
                     help="Upgrade the model the stacks get to ai.onnx opset N (ONNX version converter) "
                          "[default: each stack gets the model as written]."),
        click.option("--option", "target_opts", multiple=True, metavar="TARGET:KEY=VALUE",
                     help="A target option, e.g. ort-cpu:opt_level=basic (repeatable)."),
        click.option("--cache-dir", type=click.Path(file_okay=False),
                     help="Artifact/zoo cache folder [env COMPSTACK_CACHE_DIR; default ~/.cache/compstack]."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


#: ``--threads`` of compare/run/profile (its default is computed when used, not at import).
_THREADS_HELP = ("Threads every stack gets, each by its own knob (ORT intra-op threads, TVM_NUM_THREADS, IREE "
                 "task topology, XLA's CPU affinity, torch.set_num_threads; OMP/MKL env too); 0 leaves each "
                 "stack at its own default. Requested and observed busy threads go into every row's flags. "
                 "[default: this machine's physical cores, as ONNX Runtime picks; the other stacks would "
                 "each pick differently]")


def _threads_option(f: Any) -> Any:
    return click.option("--threads", type=click.IntRange(min=0, max=4096), default=None, metavar="N",
                        help=_THREADS_HELP)(f)


def _run_options(f: Any) -> Any:
    opts = [
        click.option("--json", "as_json", is_flag=True, help="Print the run as JSON on stdout, nothing else."),
        click.option("--db", type=click.Path(dir_okay=False),
                     help="Results database [env COMPSTACK_DB; default .compstack/results.sqlite]."),
        click.option("--no-cache", is_flag=True, help="Compile everything anew; neither read nor write the cache."),
        click.option("--timeout", type=_Finite(1, 86400), default=900, show_default=True,
                     help="Wall-clock limit of one target's job, seconds."),
        click.option("--memory-limit", type=click.IntRange(min=0), default=None,
                     help="Resident-memory limit of one target's job, MiB (0: none) [default: 75% of RAM]."),
        click.option("--rtol", type=_Finite(0, 1e6), help="Relative tolerance for every float output."),
        click.option("--atol", type=_Finite(0, 1e30), help="Absolute tolerance for every float output."),
        click.option("--reference", default="auto", show_default=True,
                     help="auto (float64 onnx.reference when small enough, else ort-cpu), reference, or a target."),
        click.option("--no-latency", is_flag=True, help="Skip latency measurement."),
        click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True, help="Warm-up runs."),
        click.option("--min-runs", type=click.IntRange(min=1), default=20, show_default=True,
                     help="At least this many timed runs..."),
        click.option("--min-time", type=_Finite(0, 3600), default=1.0, show_default=True,
                     help="...and at least this many seconds of timed runs."),
        click.option("--save-inputs", type=click.Path(dir_okay=False), help="Write input set 0 to this .npz."),
        click.option("--save-outputs", type=click.Path(dir_okay=False),
                     help="Write every target's outputs to this .npz (keys TARGET::OUTPUT)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return _threads_option(f)


def _parse_target_options(items: Sequence[str]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for item in items:
        target, sep, kv = item.partition(":")
        key, eq, value = kv.partition("=")
        if not sep or not eq or not key:
            raise UserError(f"--option {item}: expected TARGET:KEY=VALUE (e.g. ort-cpu:opt_level=basic)")
        out.setdefault(target, {})[key] = value
    return out


def _validate_target_options(opts: dict[str, dict[str, str]]) -> None:
    from compstack import targets as registry

    for target, kv in opts.items():
        cls = registry.get(target)
        cls.Options.from_strings(kv, owner=target)


def _load_source(model: str, cache_dir: str | None, timeout: float = 900.0, memory_limit: int | None = None,
                 partial: bool = False) -> Any:
    """Import MODEL; a ``file.py:function`` runs in a worker under ``--timeout``/``--memory-limit``,
    and this process is held to ``--memory-limit`` from here on (:mod:`compstack.core.memlimit`).
    ``partial``: a JAX program without a common IR still imports (its native path runs)."""
    from compstack.core.config import settings
    from compstack.core.memlimit import guard_own_memory
    from compstack.frontends.sources import resolve_model

    guard_own_memory(_memory_limit(memory_limit), f"working on {model}")
    return resolve_model(model, cache_dir=settings(cache_dir=cache_dir).cache_dir, timeout_s=timeout,
                         memory_mb=_memory_limit(memory_limit), partial=partial)


def _compare_options(targets: list[str], kw: dict[str, Any]) -> Any:
    from compstack.core.inputs import load_npz, parse_shapes, parse_val_ranges
    from compstack.core.latency import LatencyConfig
    from compstack.run.runner import Limits
    from compstack.run.session import CompareOptions

    topts = _parse_target_options(kw["target_opts"])
    _validate_target_options(topts)
    latency = None if kw["no_latency"] else LatencyConfig(
        warmup=kw["warmup"], min_runs=kw["min_runs"], min_time_s=kw["min_time"])
    return CompareOptions(
        targets=targets, seed=kw["seed"],
        inputs=load_npz(kw["inputs_file"]) if kw["inputs_file"] else None,
        val_ranges=parse_val_ranges(kw["val_ranges"]), shapes=parse_shapes(kw["input_shapes"]),
        rtol=kw["rtol"], atol=kw["atol"], latency=latency,
        limits=Limits(timeout_s=kw["timeout"], memory_mb=_memory_limit(kw["memory_limit"])),
        cache=not kw["no_cache"], reference=kw["reference"], target_options=topts, opset=kw["opset"],
        threads=kw["threads"],
    )


def _memory_limit(value: int | None) -> int:
    from compstack.run.runner import default_memory_mb

    return default_memory_mb() if value is None else value


def _check_writable_file(path: str | None, flag: str) -> None:
    """One-line UserError when the folder that will hold ``path`` cannot be written."""
    if path:
        _probe_dir(Path(path).resolve().parent, f"{flag} {path}: folder not writable")


def _probe_dir(folder: Path, message: str) -> Path:
    """Create ``folder`` and write a probe file in it; UserError ``message (why)`` if that fails."""
    from compstack.core.integrity import probe_dir

    return probe_dir(folder, message)


def _add_framework_row(targets: list[str], targets_spec: str, framework: str) -> None:
    """A TensorFlow/Paddle/MindSpore model compared on ``cpu`` or ``all`` also runs in its
    own framework (the ``tf``/``paddle``/``mindspore`` row), so an exporter bug shows as
    the framework disagreeing with every stack. Named targets are left as given."""
    aliases = {t.strip() for t in targets_spec.split(",")}
    if framework in ("tf", "paddle", "mindspore") and aliases & {"cpu", "all"} and framework not in targets:
        targets.append(framework)


def _do_compare(model: str, targets_spec: str, kw: dict[str, Any]) -> Any:
    from compstack import targets as registry
    from compstack.core.config import settings
    from compstack.report.tables import Progress
    from compstack.run.session import compare

    targets = registry.resolve(targets_spec)
    if kw["reference"] not in ("auto", "reference"):
        registry.get(kw["reference"])
    for flag in ("save_inputs", "save_outputs"):
        _check_writable_file(kw[flag], "--" + flag.replace("_", "-"))
    cfg = settings(cache_dir=kw["cache_dir"], db=kw["db"])
    options = _compare_options(targets, kw)
    with Progress(enabled=not kw["as_json"]) as progress:
        progress.status(f"importing {model}")
        source = _load_source(model, kw["cache_dir"], kw["timeout"], kw["memory_limit"],
                              partial=True)  # a native path may run what does not import
        _add_framework_row(options.targets, targets_spec, source.framework)
        report = compare(source, options, cfg, on_start=progress.start, on_result=progress.done,
                         save_outputs=Path(kw["save_outputs"]) if kw["save_outputs"] else None,
                         save_inputs=Path(kw["save_inputs"]) if kw["save_inputs"] else None)
    return report


# ---------------------------------------------------------------------------------------
# commands


@cli.command(short_help="Compare targets on a model: numerics, compile time, latency.")
@click.argument("model", required=False)
@click.option("--targets", "targets_spec", default="cpu", show_default=True,
              help="Comma-separated targets or aliases (cpu, all); see `compstack targets`.")
@_common_model_options
@_run_options
@click.option("--junit", "junit", type=click.Path(dir_okay=False),
              help="Also write JUnit XML here: one testcase per target (mismatch: failure; failed, crashed, "
                   "timeout, oom: error; unsupported, unavailable: skipped).")
def compare(model: str | None, targets_spec: str, **kw: Any) -> None:
    """Compare targets on MODEL (zoo:NAME, file.onnx, file.py:function; default zoo:cnn).

    Exit status: 0 when every row is ok, unsupported or unavailable; 1 when a row is
    mismatch, failed, crashed, timeout or oom; 2 on bad input.
    """
    from compstack.frontends.sources import DEFAULT_MODEL
    from compstack.report.tables import print_report

    _check_writable_file(kw["junit"], "--junit")
    report = _do_compare(model or DEFAULT_MODEL, targets_spec, kw)
    if kw["junit"]:
        from compstack.report.junit import compare_junit, write_junit

        write_junit(Path(kw["junit"]), compare_junit(report))
    if kw["as_json"]:
        click.echo(json.dumps(report.to_json(), indent=1, default=str))
    else:
        print_report(report)
    _exit_for(report)


#: Statuses that make ``compare``/``run`` exit 1: the stack ran and was wrong, or broke.
_BAD = ("mismatch", "failed", "crashed", "timeout", "oom")


def _exit_for(report: Any) -> None:
    """Exit 1 when a row is mismatch/failed/crashed/timeout/oom, or its stack failed
    while timing (``latency_error``; unavailable and unsupported are facts about the
    machine or the stack, not failures)."""
    if any(r.status in _BAD or r.latency_error for r in report.results):
        sys.exit(1)


@cli.command(short_help="Run a model on one target: outputs, numerics, latency.")
@click.argument("model")
@click.option("--target", "target", required=True, help="One target; see `compstack targets`.")
@_common_model_options
@_run_options
def run(model: str, target: str, **kw: Any) -> None:
    """Run MODEL on one target: outputs summary, numerics against the reference, latency."""
    from compstack.report.tables import print_outputs, print_report

    report = _do_compare(model, _resolve_one(target), kw)
    if kw["as_json"]:
        click.echo(json.dumps(report.to_json(), indent=1, default=str))
    else:
        print_outputs(report)
        print_report(report)
    _exit_for(report)


@cli.command(short_help="Lower and compile for a target: artifact, stages, manifest.json.")
@click.argument("model")
@click.option("--target", "target", required=True, help="One target; see `compstack targets`.")
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder for the artifact, the stage dumps and manifest.json.")
@_common_model_options
@click.option("--timeout", type=_Finite(1, 86400), default=900, show_default=True,
              help="Wall-clock limit of the job, seconds.")
@click.option("--memory-limit", type=click.IntRange(min=0), default=None,
              help="Resident-memory limit of the job, MiB (0: none) [default: 75% of RAM].")
@click.option("--soc", default=None, metavar="SOC",
              help="Processor the artifact is for (cann: ATC --soc_version, e.g. Ascend910B); "
                   "same as --option TARGET:soc=SOC.")
def lower(model: str, target: str, out_dir: str, **kw: Any) -> None:
    """Lower and compile MODEL for TARGET; write artifact, stages and manifest.json to -o."""
    from compstack.run.lower import lower_to_folder

    names = _resolve_one(target)
    topts = _parse_target_options(kw["target_opts"])
    if kw["soc"] is not None:
        _add_soc(topts, names, kw["soc"])
    _validate_target_options(topts)
    out = _writable_dir(out_dir)
    source = _load_source(model, kw["cache_dir"], kw["timeout"], kw["memory_limit"])
    kw["memory_limit"] = _memory_limit(kw["memory_limit"])
    manifest = lower_to_folder(source, names, out, topts.get(names, {}), kw)
    status = manifest["status"]
    click.echo(f"{names}: {status}" + (f" ({manifest['stage']}: {manifest['error']})" if status != "ok" else ""))
    for f in manifest.get("artifacts", []):
        click.echo(f"  artifact  {f}")
    click.echo(f"  stages    {', '.join(manifest.get('stages', [])) or '(none written)'}")
    if status != "ok":
        _echo_failure(manifest)
    click.echo(f"  manifest  {out / 'manifest.json'}")
    if status != "ok":
        sys.exit(1)


def _echo_failure(manifest: dict[str, Any]) -> None:
    """The failing stage, the stack's log tail, the command that reproduces it, a hint."""
    if manifest.get("failed_stage"):
        click.echo(f"  failed    at stage {manifest['failed_stage']}")
    log = [ln for ln in (manifest.get("log") or "").splitlines() if ln.strip()]
    if log and manifest.get("command"):  # a tool's stderr (a traceback is in the manifest)
        for ln in log[-6:]:
            click.echo(f"  | {ln[:300]}")
    if manifest.get("command"):
        click.echo(f"  command   {manifest['command']}")
        click.echo(f"            (its input files are in {manifest['temps']})" if manifest.get("temps") else
                   "            (rerun with COMPSTACK_SAVE_TEMPS=DIR to keep the files it reads)")
    if manifest.get("hint"):
        click.echo(f"  hint      {manifest['hint']}")


def _add_soc(topts: dict[str, dict[str, str]], target: str, soc: str) -> None:
    """``--soc SOC``: the target's ``soc`` option, checked with a one-line error."""
    import dataclasses

    from compstack import targets as registry

    options = registry.get(target).Options
    if "soc" not in {f.name for f in dataclasses.fields(options)}:
        raise UserError(f"--soc: target '{target}' has no SoC option (cann has)")
    problem = options(soc=soc).validate()  # type: ignore[call-arg]
    if problem:
        raise UserError(f"--soc {soc}: {problem.partition(': ')[2] or problem}")
    topts.setdefault(target, {})["soc"] = soc


def _resolve_one(target: str) -> str:
    from compstack import targets as registry

    names = registry.resolve(target)
    if len(names) != 1:
        raise UserError(f"--target {target}: names {len(names)} targets ({', '.join(names)}); give one")
    return names[0]


def _print_ops(name: str, as_json: bool) -> None:
    """``compstack targets --ops NAME``: the op list and where it comes from."""
    from compstack import targets as registry

    cls = registry.get(name)
    try:
        ops = cls.supported_ops()
    except ImportError as exc:
        raise UserError(f"--ops {name}: the stack is not installed ({exc})") from None
    if as_json:
        click.echo(json.dumps({"target": name, "source": cls.ops_note, "ops": ops}, indent=1))
        return
    if ops is None:
        click.echo(f"{name}: no op list: {cls.ops_note}")
        return
    click.echo(f"{name}: {len(ops)} ops ({cls.ops_note})")
    width = max(len(o) for o in ops) + 2 if ops else 1
    per_line = max(1, 100 // width)
    for i in range(0, len(ops), per_line):
        click.echo("".join(o.ljust(width) for o in ops[i:i + per_line]).rstrip())


def _writable_dir(path: str) -> Path:
    return _probe_dir(Path(path), f"-o {path}: output folder not writable")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.option("--ops", "ops_of", metavar="TARGET", help="List the ONNX ops TARGET takes, as the stack lists them.")
def targets(as_json: bool, ops_of: str | None) -> None:
    """List every known target: available or not, and why; versions."""
    from compstack.report.tables import print_targets, target_rows

    if ops_of is not None:
        _print_ops(_resolve_one(ops_of), as_json)
        return
    rows = target_rows()
    if as_json:
        click.echo(json.dumps(rows, indent=1))
    else:
        print_targets(rows)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def frontends(as_json: bool) -> None:
    """List the frontends (onnx, torch, jax, tf, paddle, mindspore): available or not, why, versions."""
    from compstack.frontends.registry import frontend_rows
    from compstack.report.tables import print_frontends

    rows = [r.to_dict() for r in frontend_rows()]
    if as_json:
        click.echo(json.dumps(rows, indent=1))
    else:
        print_frontends(rows)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.option("--cache-dir", type=click.Path(file_okay=False), help="Cache folder (zoo exports are cached).")
def zoo(as_json: bool, cache_dir: str | None) -> None:
    """List the zoo models with their node and parameter counts (TensorFlow, Paddle and MindSpore
    models only where that framework is available: see `compstack frontends`)."""
    from compstack.core.config import settings
    from compstack.frontends import zoo as zoo_mod
    from compstack.report.tables import print_zoo

    root = settings(cache_dir=cache_dir).cache_dir
    rows = [{"name": f"zoo:{n}", **zoo_mod.info(n, cache_dir=root)} for n in zoo_mod.names(available_only=True)]
    if as_json:
        click.echo(json.dumps(rows, indent=1, default=str))
    else:
        print_zoo(rows)


@cli.command(short_help="Dump the IR of a model at a stage, or at every stage and pass.")
@click.argument("model")
@click.option("--target", "target", required=True, help="One target; see `compstack targets`.")
@click.option("--stage", "stage_names", multiple=True, help="A stage to dump (repeatable); see `compstack stages`.")
@click.option("--all", "all_passes", is_flag=True, help="Every stage, and the IR after every pass, with pass timing.")
@click.option("--print-after-change", is_flag=True, help="Every stage, and the IR after each pass that changed it.")
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False),
              help="Folder for the dumps (without it, one --stage is printed to stdout).")
@click.option("--option", "target_opts", multiple=True, metavar="TARGET:KEY=VALUE", help="A target option.")
@click.option("--cache-dir", type=click.Path(file_okay=False), help="Cache folder [env COMPSTACK_CACHE_DIR].")
@click.option("--timeout", type=_Finite(1, 86400), default=900, show_default=True,
              help="Wall-clock limit of the job, seconds.")
@click.option("--memory-limit", type=click.IntRange(min=0), default=None,
              help="Resident-memory limit of the job, MiB (0: none) [default: 75% of RAM].")
def dump(model: str, target: str, stage_names: tuple[str, ...], all_passes: bool, print_after_change: bool,
         out_dir: str | None, target_opts: tuple[str, ...], cache_dir: str | None, timeout: float,
         memory_limit: int | None) -> None:
    """Dump the IR of MODEL on TARGET: one stage to stdout, or every stage (and pass) to -o."""

    from compstack.core.config import settings
    from compstack.report.tables import print_pass_timing
    from compstack.run.dump import dump as run_dump
    from compstack.run.runner import Limits

    name = _resolve_one(target)
    if all_passes and print_after_change:
        raise UserError("--all and --print-after-change: give one of them")
    passes = "all" if all_passes else ("changed" if print_after_change else "")
    if out_dir is None and (passes or len(stage_names) != 1):
        raise UserError("without -o, give exactly one --stage to print (or -o DIR to write several)")
    topts = _parse_target_options(target_opts)
    _validate_target_options(topts)
    from compstack.run.dump import check_stages

    check_stages(name, stage_names)
    folder = _writable_dir(out_dir) if out_dir else run_tempdir("compstack-dump-")
    cfg = settings(cache_dir=cache_dir)
    source = _load_source(model, cache_dir, timeout, memory_limit)
    res = run_dump(source, name, folder, stages=list(stage_names) or None, passes=passes,
                   options=topts.get(name, {}), cache_dir=cfg.cache_dir,
                   limits=Limits(timeout_s=timeout, memory_mb=_memory_limit(memory_limit)))
    o = res.outcome
    if out_dir is None:
        try:
            if o.status == "ok":
                click.echo(res.stages[stage_names[0]].read_text(), nl=False)
        finally:
            import shutil

            shutil.rmtree(folder, ignore_errors=True)
    else:
        for st, path in res.stages.items():
            click.echo(f"  {st:<28} {path}")
        if res.passes:
            kept = sum(1 for r in res.passes if r["file"])
            click.echo(f"  passes: {len(res.passes)} run, {kept} dumps in {folder / 'passes'}")
            print_pass_timing(res.timing, folder / "passes" / "timing.json")
    if o.status != "ok":
        click.echo(f"compstack: {name} {o.status} in {o.stage}: {o.error.splitlines()[0] if o.error else ''}",
                   err=True)
        sys.exit(1)


@cli.command()
@click.option("--target", "target", required=True, help="One target; see `compstack targets`.")
def stages(target: str) -> None:
    """List the stage names of TARGET, in pipeline order."""
    from compstack import targets as registry

    name = _resolve_one(target)
    cls = registry.get(name)
    for st in cls.stage_names:
        click.echo(st + ("   (after compile)" if st in cls.compiled_stages else ""))


@cli.command(short_help="Diff two IR dumps (files or MODEL@TARGET:STAGE specs).")
@click.argument("a")
@click.argument("b")
@click.option("--stat", is_flag=True, help="Only the structural summary (op histogram, fused/split nodes).")
@click.option("--json", "as_json", is_flag=True, help="The summary as JSON on stdout.")
@click.option("--strip-locations/--no-strip-locations", default=True, show_default=True,
              help="Drop source locations and debug metadata.")
@click.option("--rename/--no-rename", default=True, show_default=True,
              help="Rename SSA values and symbols canonically by position.")
@click.option("--elide-constants/--no-elide-constants", default=True, show_default=True,
              help="Replace large constants by shape, dtype and a short hash.")
@click.option("--sort/--no-sort", "sort_unordered", default=True, show_default=True,
              help="Sort what has no order (attribute dicts, top-level functions).")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True)
@click.option("--cache-dir", type=click.Path(file_okay=False), help="Cache folder [env COMPSTACK_CACHE_DIR].")
@click.option("--timeout", type=_Finite(1, 86400), default=900, show_default=True,
              help="Wall-clock limit of each dump job, seconds.")
def diff(a: str, b: str, stat: bool, as_json: bool, strip_locations: bool, rename: bool, elide_constants: bool,
         sort_unordered: bool, color: str, cache_dir: str | None, timeout: float) -> None:
    """Diff two IR dumps: files or MODEL@TARGET:STAGE specs. Exit 0 equal, 1 different, 2 error."""
    from compstack.analysis.irtext.irdiff import diff_texts
    from compstack.analysis.irtext.normalize import NormalizeOptions
    from compstack.core.config import settings
    from compstack.report.tables import print_unified
    from compstack.run.dump import resolve_text
    from compstack.run.runner import Limits

    cfg = settings(cache_dir=cache_dir)
    limits = Limits(timeout_s=timeout, memory_mb=_memory_limit(None))
    text_a, label_a = resolve_text(a, cfg.cache_dir, limits)
    text_b, label_b = resolve_text(b, cfg.cache_dir, limits)
    options = NormalizeOptions(strip_locations=strip_locations, rename=rename, elide_constants=elide_constants,
                               sort_unordered=sort_unordered)
    result = diff_texts(text_a, text_b, a_name=label_a, b_name=label_b, options=options)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=1, default=str))
    else:
        if not stat:
            print_unified(result.unified, color)
        click.echo("\n".join(result.stat_text()))
    sys.exit(0 if result.equal else 1)


@cli.command(short_help="Run the ONNX node tests on each target (funnel, XFAIL, trend).")
@click.option("--targets", "targets_spec", default="cpu", show_default=True,
              help="Comma-separated targets or aliases; see `compstack targets`.")
@click.option("--filter", "pattern", help="Only cases whose name matches this regex (e.g. 'resize|pad').")
@click.option("--sample", type=click.IntRange(min=1), help="A fixed random sample of N cases (after --filter).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --sample.")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Worker processes per target [default: cores].")
@click.option("--timeout", type=_Finite(1, 86400), default=120, show_default=True,
              help="Wall-clock limit per case (import to compare), seconds.")
@click.option("--json", "as_json", is_flag=True, help="Every case's outcome as JSON on stdout.")
@click.option("--update-xfail", is_flag=True, help="Record this run's failures as each target's XFAIL file.")
@click.option("--xfail-dir", type=click.Path(file_okay=False), help="Folder of XFAIL files [default: shipped ones].")
@click.option("--trend", "show_trend", is_flag=True, help="Print the pass rate per target over earlier runs, and exit.")
@click.option("--option", "target_opts", multiple=True, metavar="TARGET:KEY=VALUE", help="A target option.")
@click.option("--no-cache", is_flag=True, help="Compile every case anew.")
@click.option("--db", type=click.Path(dir_okay=False), help="Results database [env COMPSTACK_DB].")
@click.option("--cache-dir", type=click.Path(file_okay=False), help="Cache folder [env COMPSTACK_CACHE_DIR].")
@click.option("--junit", "junit", type=click.Path(dir_okay=False),
              help="Also write JUnit XML here: a testsuite per target, a testcase per case (failure not in the "
                   "XFAIL file: failure; in it, or unsupported: skipped).")
def conformance(targets_spec: str, pattern: str | None, sample: int | None, seed: int, workers: int | None,
                timeout: float, as_json: bool, update_xfail: bool, xfail_dir: str | None, show_trend: bool,
                target_opts: tuple[str, ...], no_cache: bool, db: str | None, cache_dir: str | None,
                junit: str | None) -> None:
    """Run the ONNX node tests on each target: funnel table, XFAIL check, history.

    Exit status 1 when a case listed nowhere in the target's XFAIL file fails (a regression).
    """
    import re

    from compstack import targets as registry
    from compstack.conformance import suite
    from compstack.conformance.cases import cases_path, load_cases, select
    from compstack.core.config import settings
    from compstack.report.tables import print_conformance, print_trend

    cfg = settings(cache_dir=cache_dir, db=db)
    if show_trend:
        rows = suite.trend(cfg.db)
        click.echo(json.dumps(rows, indent=1)) if as_json else print_trend(rows)
        return
    names = registry.resolve(targets_spec)
    topts = _parse_target_options(target_opts)
    _validate_target_options(topts)
    if pattern:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise UserError(f"--filter {pattern!r}: not a regular expression ({exc})") from None
    _probe_dir(cfg.cache_dir, f"cache folder {cfg.cache_dir}: not writable")  # the cases are cached there
    if cfg.db.exists() and not cfg.db.is_file():
        raise UserError(f"--db {cfg.db}: not a regular file")
    suite.trend(cfg.db)  # a database that is not ours fails before the run, not after it
    all_cases = load_cases(cfg.cache_dir)
    cases = select(all_cases, pattern, sample, seed)
    if not cases:
        raise UserError(f"--filter {pattern!r}: matches none of the {len(all_cases)} cases")
    cases_file = cases_path(cfg.cache_dir)
    _check_writable_file(junit, "--junit")
    progress = _ConformanceProgress(enabled=not as_json)
    with progress:
        report = suite.run_suite(cases, cases_file, names, workers=workers or os.cpu_count() or 1, timeout=timeout,
                                 cache_dir=None if no_cache else cfg.cache_dir,
                                 xfail_dir=Path(xfail_dir) if xfail_dir else suite.DEFAULT_XFAIL_DIR,
                                 update_xfail=update_xfail, target_options=topts, on_result=progress.row,
                                 on_target=progress.target,
                                 selection={"filter": pattern, "sample": sample, "seed": seed,
                                            "total_available": len(all_cases)})
    suite.store(report, cfg.db)
    if junit:
        from compstack.report.junit import conformance_junit, write_junit

        write_junit(Path(junit), conformance_junit(report))
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=1))
    else:
        print_conformance(report)
    if any(s.regressions for s in report.summaries):
        sys.exit(1)


class _ConformanceProgress:
    """A progress bar per target on stderr (only on a terminal)."""

    def __init__(self, enabled: bool) -> None:
        from rich.console import Console
        from rich.progress import Progress

        console = Console(stderr=True)
        self.enabled = enabled and console.is_terminal
        self.bar = Progress(console=console, transient=True) if self.enabled else None
        self.task: Any = None

    def __enter__(self) -> "_ConformanceProgress":
        if self.bar is not None:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def target(self, name: str, n: int) -> None:
        if self.bar is not None:
            self.task = self.bar.add_task(name, total=n)

    def row(self, target: str, row: dict[str, Any]) -> None:
        if self.bar is not None and self.task is not None:
            self.bar.advance(self.task)


@cli.command(short_help="Render a stored run as one self-contained HTML file.")
@click.option("--last", is_flag=True, help="The newest run in the database (the default).")
@click.option("--run", "run_id", metavar="ID", help="The run with this id (see `compare --json`: run_id).")
@click.option("--sweep", is_flag=True,
              help="Name the newest stored sweep (its matrix: `compstack sweep --last --matrix`).")
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), help="The HTML file to write.")
@click.option("--db", type=click.Path(dir_okay=False), help="Results database [env COMPSTACK_DB].")
def report(last: bool, run_id: str | None, sweep: bool, out: str | None, db: str | None) -> None:
    """Render one run of the results database as one HTML file (inline CSS and SVG, no
    script, nothing fetched): targets, latency and compile-time plots, numerics per
    output, versions and flags, the newest conformance run; it names what the database
    does not hold."""
    from compstack.core.config import settings

    cfg = settings(db=db)
    if sweep:
        from compstack.report.html import sweep_line

        click.echo(sweep_line(cfg.db))
        return
    if last and run_id:
        raise UserError("--last and --run: give one of them")
    if not out:
        raise UserError("-o FILE.html is required (the page is written there)")
    _check_writable_file(out, "-o")
    from compstack.report.html import write_report

    data, size = write_report(cfg.db, Path(out), run_id)
    what = f"{data.rows[0]['model_name']}, {len(data.rows)} targets" if data.rows else "conformance run"
    click.echo(f"wrote {out} ({size / 1024:.1f} KiB): run {data.run_id} ({what})")


@cli.command(short_help="Run models x targets (locally or on Ray); the status matrix of a sweep.")
@click.argument("models", nargs=-1)
@click.option("--targets", "targets_spec", default="cpu", show_default=True, help="Comma-separated targets or aliases.")
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
@click.option("--matrix", is_flag=True, help="With --last: print its status matrix.")
@_common_model_options
@_run_options
def sweep(models: tuple[str, ...], targets_spec: str, **kw: Any) -> None:
    """Run every MODEL (zoo:NAME, zoo:*, file.onnx, a folder of .onnx, @list.txt) on every target.

    Exit status: 0 when every row is ok, unsupported or unavailable; 1 otherwise; 2 on bad input.
    """
    from compstack.sweep import cli_sweep

    summary = cli_sweep(list(models), targets_spec, kw, _compare_options)
    if kw["as_json"]:
        click.echo(json.dumps(summary, indent=1, default=str))
    else:
        from compstack.sweep import print_summary

        print_summary(summary)
    if any(c["status"] in _BAD for cells in summary["matrix"].values() for c in cells.values()):
        sys.exit(1)


@cli.command("import-profile", short_help="Map a trtexec per-layer profile to the model's ONNX nodes.")
@click.argument("model")
@click.option("--profile", "profile", required=True, type=click.Path(dir_okay=False),
              help="trtexec --exportProfile JSON.")
@click.option("--layer-info", "layer_info", type=click.Path(dir_okay=False),
              help="trtexec --exportLayerInfo JSON (built with --profilingVerbosity=detailed).")
@click.option("--json", "as_json", is_flag=True, help="Print the mapping as JSON on stdout, nothing else.")
@click.option("--cache-dir", type=click.Path(file_okay=False), help="Cache folder (zoo exports are cached).")
def import_profile(model: str, profile: str, layer_info: str | None, as_json: bool, cache_dir: str | None) -> None:
    """Map each TensorRT layer of a trtexec profile back to MODEL's nodes (zoo:NAME, file.onnx):
    per-layer times, the nodes each covers, coverage and unmapped nodes."""
    from compstack.targets.trt.profile import format_text, load_layer_info, load_profile, map_profile

    load_profile(profile)  # bad files fail before the model is imported
    if layer_info is not None:
        load_layer_info(layer_info)
    source = _load_source(model, cache_dir)
    report = map_profile(source.model, profile, layer_info, model_name=source.name)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=1))
    else:
        click.echo("\n".join(format_text(report)))


@cli.group(short_help="Custom ops: list them, test every stack against the reference, build the kernels.")
def ops() -> None:
    """Custom ops declared with compstack.ops.custom_op (compstack's own: compstack::rms_norm,
    compstack::bias_gelu). --load FILE.py|MODULE imports a user's declarations first."""


def _load_ops(items: Sequence[str]) -> None:
    """Import each ``--load FILE.py|MODULE``.

    Raises:
        UserError: a missing file, a module that cannot be found, or an import that
            raises, naming the ``--load`` value.
    """
    from compstack.ops._registry import load_origins

    for x in items:
        if x.endswith(".py") and not Path(x).is_file():
            raise UserError(f"--load {x}: no such file")
        try:
            load_origins([f"file:{Path(x).resolve()}" if x.endswith(".py") else f"module:{x}"])
        except CompstackError:
            raise
        except ModuleNotFoundError as exc:
            raise UserError(f"--load {x}: no module named {exc.name!r} (give FILE.py or an importable module)") \
                from None
        except BaseException as exc:  # the user's module may raise anything while imported
            if isinstance(exc, KeyboardInterrupt):
                raise
            text = str(exc).strip().splitlines()
            raise UserError(f"--load {x}: import failed: {type(exc).__name__}"
                            f"{': ' + text[0] if text else ''}") from None


def _get_op(name: str) -> Any:
    from compstack.ops import get

    try:
        return get(name)
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from None


_LOAD = click.option("--load", "modules", multiple=True, metavar="FILE.py|MODULE",
                     help="Import a file or module that declares custom ops (repeatable).")


@ops.command("list", short_help="Registered custom ops, their kernels and the stacks that run them.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@_LOAD
def ops_list(as_json: bool, modules: tuple[str, ...]) -> None:
    """Every registered custom op: signature, attributes, kernels, and per stack how it
    runs the op or why it cannot."""
    from compstack.ops import all_ops
    from compstack.ops._info import describe

    _load_ops(modules)
    rows = [describe(op) for op in all_ops()]
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    for row in rows:
        sig = ", ".join(f"{p['name']}: {p['type'] or '|'.join(p['dtypes'])}" for p in row["inputs"])
        outs = ", ".join(f"{p['name']}: {p['type'] or '|'.join(p['dtypes'])}" for p in row["outputs"])
        click.echo(f"{row['name']}({sig}) -> ({outs})  v{row['version']}")
        if row["doc"]:
            click.echo(f"  {row['doc'].splitlines()[0]}")
        types = {p["type"]: p["dtypes"] for p in row["inputs"] + row["outputs"] if p["type"]}
        for var, dts in types.items():
            click.echo(f"  {var}: {', '.join(dts)}")
        for a in row["attrs"]:
            default = "required" if a["default"] is None else f"default {a['default']!r}"
            click.echo(f"  attr {a['name']}: {a['type']} ({default}){' - ' + a['doc'] if a['doc'] else ''}")
        kernels = ", ".join(f"{dev}: {sym}" for dev, sym in row["kernels"].items()) or "none"
        click.echo(f"  kernels: {kernels}")
        for target, how in row["stacks"].items():
            click.echo(f"    {target:<14} {how}")
        click.echo("")


def _parse_attrs(items: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not eq or not key:
            raise UserError(f"--attr {item}: expected NAME=VALUE (e.g. epsilon=1e-5)")
        value: Any
        if raw.lower() in ("true", "false"):
            value = raw.lower() == "true"
        else:
            try:
                value = int(raw)
            except ValueError:
                try:
                    value = float(raw)
                except ValueError:
                    raise UserError(f"--attr {item}: {raw!r} is not a number or true/false") from None
        out[key] = value
    return out


@ops.command("test", short_help="Run a custom op on every stack against its NumPy reference.")
@click.argument("name")
@click.option("--targets", "targets_spec", default=None,
              help="Comma-separated targets [default: ort-cpu,tvm-llvm,iree-llvm-cpu,xla-cpu,inductor-cpu].")
@click.option("--attr", "attrs", multiple=True, metavar="NAME=VALUE", help="An attribute value (repeatable).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--timeout", type=_Finite(1, 86400), default=900, show_default=True,
              help="Wall-clock limit of one target's process, seconds.")
@click.option("--json", "as_json", is_flag=True, help="Print every cell as JSON.")
@_LOAD
def ops_test(name: str, targets_spec: str | None, attrs: tuple[str, ...], seed: int, timeout: float,
             as_json: bool, modules: tuple[str, ...]) -> None:
    """Run NAME (domain::op) on the C kernel directly and on each target, over the op's
    test shapes and each declared dtype, against its NumPy reference (float64); print
    the pass/fail matrix. Exit status 1 when a cell fails or errors."""
    from compstack import targets as registry
    from compstack.run.optest import DEFAULT_TARGETS, format_matrix, run_matrix

    _load_ops(modules)
    op = _get_op(name)
    targets = registry.resolve(targets_spec) if targets_spec else list(DEFAULT_TARGETS)
    report = run_matrix(op, targets, _parse_attrs(attrs), seed=seed, timeout=timeout)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=1))
    else:
        click.echo("\n".join(format_matrix(report)))
    if not report.ok:
        sys.exit(1)


@ops.command("build", short_help="Build the custom-op kernel library (CMake), cached by source hash.")
@click.option("--cuda", is_flag=True, help="Also build the CUDA kernels (needs nvcc).")
@click.option("--json", "as_json", is_flag=True, help="Print the built files as JSON.")
@_LOAD
def ops_build(cuda: bool, as_json: bool, modules: tuple[str, ...]) -> None:
    """Configure and build CMakeLists.txt (csrc/ plus registered user sources) under the
    compstack cache; print what was built. A second run with the same sources builds nothing."""
    from compstack.ops._kernel import _sources
    from compstack.ops.build import ensure_built

    _load_ops(modules)
    cpu, cuda_src = _sources()
    lib = ensure_built(cpu, cuda_src, cuda=cuda)
    rows = {"folder": str(lib.folder), "cpu": str(lib.cpu), "iree_objects": [str(p) for p in lib.iree_objects],
            "xla": str(lib.xla) if lib.xla else None, "cuda": str(lib.cuda) if lib.cuda else None}
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    for key, value in rows.items():
        click.echo(f"{key:<13} {', '.join(value) if isinstance(value, list) else value or '(not built)'}")


def _kernel_job_options(f: Any) -> Any:
    opts = [
        click.option("--opset", type=click.IntRange(min=1), default=None, metavar="N",
                     help="Upgrade the model the stacks get to ai.onnx opset N (ONNX version converter) "
                          "[default: each stack gets the model as written]."),
        click.option("--option", "target_opts", multiple=True, metavar="TARGET:KEY=VALUE",
                     help="A target option (repeatable)."),
        click.option("--json", "as_json", is_flag=True, help="Print everything as JSON on stdout, nothing else."),
        click.option("--cache-dir", type=click.Path(file_okay=False), help="Cache folder [env COMPSTACK_CACHE_DIR]."),
        click.option("--timeout", type=_Finite(1, 86400), default=900, show_default=True,
                     help="Wall-clock limit of one target's job, seconds."),
        click.option("--memory-limit", type=click.IntRange(min=0), default=None,
                     help="Resident-memory limit of one target's job, MiB (0: none) [default: 75% of RAM]."),
        click.option("--trt-profile", type=click.Path(dir_okay=False),
                     help="Add TensorRT as a row: trtexec --exportProfile JSON from a GPU machine."),
        click.option("--trt-layer-info", type=click.Path(dir_okay=False),
                     help="...and its trtexec --exportLayerInfo JSON (--profilingVerbosity=detailed)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _kernel_kw(kw: dict[str, Any]) -> dict[str, Any]:
    if kw.get("trt_layer_info") and not kw.get("trt_profile"):
        raise UserError("--trt-layer-info needs --trt-profile (the trtexec --exportProfile JSON)")
    if kw.get("trt_profile"):  # bad files fail before any target runs
        from compstack.targets.trt.profile import load_layer_info, load_profile

        load_profile(kw["trt_profile"], "--trt-profile")
        if kw.get("trt_layer_info"):
            load_layer_info(kw["trt_layer_info"], "--trt-layer-info")
    topts = _parse_target_options(kw["target_opts"])
    _validate_target_options(topts)
    kw["target_options"] = topts
    kw["memory_limit"] = _memory_limit(kw["memory_limit"])
    return kw


@cli.command(short_help="Kernels of each target mapped to the source graph; fusion groups compared.")
@click.argument("model")
@click.option("--targets", "targets_spec", default="cpu", show_default=True,
              help="Comma-separated targets or aliases (cpu, all).")
@click.option("--missed", is_flag=True, help="List producer->consumer pairs fused by one target and not another.")
@click.option("--by-node", is_flag=True, hidden=True)
@_kernel_job_options
def fusion(model: str, targets_spec: str, missed: bool, by_node: bool, **kw: Any) -> None:
    """Map every kernel/dispatch/fusion of each target back to MODEL's nodes: kernel counts,
    coverage, the kernel computing each node, and where the partitions differ."""
    from compstack import targets as registry
    from compstack.cli.fusion import fusion_command

    if by_node:
        raise UserError("--by-node needs per-kernel times: use `compstack profile MODEL --by-node`")
    targets = registry.resolve(targets_spec)
    kw = _kernel_kw(kw)
    load = lambda: _load_source(model, kw["cache_dir"], kw["timeout"], kw["memory_limit"])  # noqa: E731
    sys.exit(fusion_command(load, targets, missed, kw["as_json"], kw))


@cli.command(short_help="Per-kernel time from each stack's own profiler, mapped to the source graph.")
@click.argument("model")
@click.option("--target", "target", help="One target.")
@click.option("--targets", "targets_spec", help="Comma-separated targets or aliases (cpu, all) [default: cpu].")
@click.option("--by-node", is_flag=True, help="Each source node's share of the time on each target.")
@click.option("--export-model-explorer", "explorer_dir", type=click.Path(file_okay=False),
              help="Write Model Explorer node-data files (per-node time, kernel per target) to this folder.")
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True, help="Warm-up runs.")
@click.option("--min-runs", type=click.IntRange(min=1), default=20, show_default=True,
              help="At least this many profiled runs...")
@click.option("--min-time", type=_Finite(0, 3600), default=1.0, show_default=True,
              help="...and enough for this many seconds at the measured latency (at most 200 runs).")
@click.option("--refresh-peak", is_flag=True, help="Measure this machine's roofline peaks again (else cached).")
@click.option("--trace", "trace", type=click.Path(dir_okay=False),
              help="Write a Chrome trace-event JSON (ui.perfetto.dev): per target one median run, kernels as slices.")
@_threads_option
@_kernel_job_options
def profile(model: str, target: str | None, targets_spec: str | None, by_node: bool, explorer_dir: str | None,
            **kw: Any) -> None:
    """Time every kernel of MODEL on each target with the stack's own profiler (warm-up,
    repeats, median, CV), beside the end-to-end latency; roofline placement per kernel."""
    from compstack import targets as registry
    from compstack.cli.fusion import profile_command

    if target and targets_spec:
        raise UserError("--target and --targets: give one of them")
    targets = [_resolve_one(target)] if target else registry.resolve(targets_spec or "cpu")
    folder = _probe_dir(Path(explorer_dir), f"--export-model-explorer {explorer_dir}: folder not writable") \
        if explorer_dir else None
    _check_writable_file(kw["trace"], "--trace")
    kw = _kernel_kw(kw)
    load = lambda: _load_source(model, kw["cache_dir"], kw["timeout"], kw["memory_limit"])  # noqa: E731
    sys.exit(profile_command(load, targets, by_node, kw["as_json"], folder, kw))


def _explain_options(f: Any) -> Any:
    opts = [
        click.option("--targets", "targets_spec", help="Comma-separated targets or aliases to explain."),
        click.option("--keep", help="The property to keep, e.g. 'xla-cpu!=ref,ort-cpu==ref' "
                                    "[default: the first wrong target !=ref]."),
        click.option("--time-budget", help="Stop reducing after this long (90s, 10m, 1h) [default: no limit]."),
        click.option("--timeout", type=_Finite(1, 86400), default=300, show_default=True,
                     help="Wall-clock limit of one compile-and-run of a piece, seconds."),
        click.option("--rtol", type=_Finite(0, 1e6), help="Relative tolerance of the verdict [1e-3]."),
        click.option("--atol", type=_Finite(0, 1e30), help="Absolute tolerance of the verdict [1e-5]."),
        click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON on stdout, nothing else."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _explain_run(model: str | None, kw: dict[str, Any], steps: str, reduced_out: str | None = None) -> int:
    from compstack import targets as registry
    from compstack.cli.explain import explain_command, parse_duration

    if not model:
        raise UserError("missing MODEL (zoo:NAME, file.onnx or file.py:function)")
    if not kw.get("targets_spec"):
        raise UserError("--targets is required: the target(s) whose disagreement to explain")
    targets = registry.resolve(kw["targets_spec"])
    parse_duration(kw.get("time_budget"))  # bad input before any work
    if kw.get("keep"):
        from compstack.explain.keep import parse_keep

        parse_keep(kw["keep"], targets)
    topts = _parse_target_options(kw["target_opts"])
    _validate_target_options(topts)
    kw["target_options"] = topts
    if kw.get("out_dir"):
        from compstack.explain.bundle import check_bundle_dir

        check_bundle_dir(Path(kw["out_dir"]))  # never a folder with the user's own files in it
        _probe_dir(Path(kw["out_dir"]), f"-o {kw['out_dir']}: folder not writable")
    if reduced_out:
        _check_writable_file(reduced_out, "-o")
    return explain_command(lambda: _load_source(model, kw["cache_dir"]), targets, kw, steps, reduced_out)


@cli.command(short_help="Why a target disagrees: verdict, first divergent node, reduced model, whose fault, bundle.")
@click.argument("model", required=False)
@_explain_options
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False),
              help="Write an upstream-ready bundle (reduced model, test data, repro_<target>.py, ISSUE.md) here.")
@click.option("--replay", "replay_dir", type=click.Path(file_okay=False),
              help="Rerun a bundle written by -o: does the discrepancy still reproduce?")
@_common_model_options
def explain(model: str | None, replay_dir: str | None, **kw: Any) -> None:
    """Explain why the targets disagree with the float64 reference (or each other) on MODEL:
    verdict with the float32 noise floor, the first divergent node (bisecting graph
    prefixes), a delta-debugged reduced model, the culprit (compstack's translation, the
    stack's optimiser, or the stack), and with -o a bundle to attach to an upstream issue.

    Exit status: 0 explained (or nothing differs; with --replay: still reproduces), 1 the
    --keep property does not hold (with --replay: no longer reproduces), 2 bad input.
    """
    if replay_dir:
        from compstack.cli.explain import replay_command

        if model:
            raise UserError("--replay takes the bundle folder only, not MODEL")
        sys.exit(replay_command(replay_dir, kw["as_json"], kw["timeout"]))
    sys.exit(_explain_run(model, kw, "all"))


@cli.command(short_help="Delta-debug MODEL down to the nodes that keep a target's disagreement.")
@click.argument("model", required=False)
@_explain_options
@click.option("-o", "--out", "reduced_out", type=click.Path(dir_okay=False), help="Write the reduced model here.")
@_common_model_options
def reduce(model: str | None, reduced_out: str | None, **kw: Any) -> None:
    """Reduce MODEL (ddmin over nodes, cut tensors fed with the reference's values) while
    the --keep property holds; prints nodes before -> after, compiles and time."""
    sys.exit(_explain_run(model, kw, "reduce", reduced_out))


@cli.command(short_help="The first node where a target diverges from the reference (bisecting graph prefixes).")
@click.argument("model", required=False)
@_explain_options
@_common_model_options
def bisect(model: str | None, **kw: Any) -> None:
    """Binary-search graph prefixes of MODEL (each compiled with its frontier as outputs)
    for the first divergent node, then run that node alone on the reference's inputs."""
    sys.exit(_explain_run(model, kw, "bisect"))


@cli.command(short_help="Fuzz the stacks with random valid ONNX graphs; dedup, reduce and bundle findings.")
@click.option("--targets", "targets_spec", default="cpu", show_default=True, help="Targets or aliases to fuzz.")
@click.option("--time", "budget", default="10m", show_default=True, help="Campaign budget (90s, 10m, 1h).")
@click.option("--graphs", "max_graphs", type=click.IntRange(min=1), help="Stop after this many graphs.")
@click.option("--seed", type=int, default=0, show_default=True, help="Campaign seed (graph i is reproducible).")
@click.option("--ops", help="Regex matched against whole op types (e.g. 'Conv|Resize|Pad') [default: all specs].")
@click.option("--max-nodes", type=click.IntRange(1, 64), default=6, show_default=True, help="Nodes per graph, at most.")
@click.option("--dtypes", help="Comma-separated dtypes of inputs [default: all of float32,float16,bfloat16,"
                               "int8,int32,int64,bool].")
@click.option("--allow-ub", is_flag=True, help="Keep inputs with undefined behaviour; label such findings undefined.")
@click.option("--no-reduce", is_flag=True, help="Record findings without reducing and bundling them.")
@click.option("--equivalence", type=_Finite(0, 1), default=0.5, show_default=True,
              help="Share of graphs also run as a semantically equal rewrite.")
@click.option("--timeout", type=_Finite(1, 86400), default=60, show_default=True, help="Limit of one evaluation, s.")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Where evaluations run.")
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False), help="Bundles of the findings (DIR/NNNN).")
@click.option("--report", "report_dir", type=click.Path(file_okay=False), help="Print the campaign of a -o folder.")
@click.option("--replay", "replay_dir", type=click.Path(file_okay=False), help="Rerun one finding's bundle.")
@click.option("--update-known", is_flag=True, help="Add this campaign's findings to compstack/fuzz/known/.")
@click.option("--db", type=click.Path(dir_okay=False), help="Results database [env COMPSTACK_DB].")
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON on stdout, nothing else.")
def fuzz(**kw: Any) -> None:
    """Generate valid-by-construction ONNX graphs over the op specs, run them on every
    target against the float64 reference (noise floor), check crashes per stage and
    equivalent rewrites, dedup findings by signature, reduce and bundle each unique one.

    Exit status: 0 nothing new (or --report/--replay reproduces), 1 a new finding
    (--replay: does not reproduce), 2 bad input.
    """
    from compstack import targets as registry
    from compstack.cli import fuzz as fc
    from compstack.cli.explain import parse_duration
    from compstack.core import config

    if kw["report_dir"]:
        sys.exit(fc.report_command(kw["report_dir"], Path(kw["db"]) if kw["db"] else None))
    if kw["replay_dir"]:
        sys.exit(fc.replay_command(kw["replay_dir"], kw["timeout"], kw["as_json"]))
    if kw["executor"] == "ray":
        raise UserError("--executor ray: not available yet (compstack has no Ray executor); use --executor local")
    if kw["ops"]:
        try:
            re.compile(kw["ops"])
        except re.error as exc:
            raise UserError(f"--ops {kw['ops']!r}: not a regular expression ({exc})") from None
    from compstack.fuzz.campaign import CampaignOptions

    opts = CampaignOptions(registry.resolve(kw["targets_spec"]), kw["seed"], parse_duration(kw["budget"], "--time"),
                           kw["max_graphs"], kw["max_nodes"], fc.parse_dtypes(kw["dtypes"]), kw["ops"],
                           kw["allow_ub"], Path(kw["out_dir"]) if kw["out_dir"] else None, kw["timeout"],
                           kw["equivalence"], not kw["no_reduce"])
    if opts.out_dir:
        _probe_dir(opts.out_dir, f"-o {opts.out_dir}: folder not writable")
    db = config.settings(db=kw["db"]).db
    sys.exit(fc.fuzz_command(opts, db, kw["update_known"], kw["as_json"]))


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point. Usage errors are one line too, like every other bad input.

    Exit status: 0 ok, 1 a row failed (see each command), 2 bad input, 130 interrupted
    by Ctrl-C, 143 terminated by SIGTERM (128 + the signal number, as shells report).
    """
    import signal

    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="compstack", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort as exc:
        _interrupted(exc)
    except KeyboardInterrupt as exc:
        _interrupted(exc)
    except click.UsageError as exc:
        where = f" ({exc.ctx.command_path})" if exc.ctx is not None else ""
        _fail(f"{exc.format_message()}{where}")
    except click.ClickException as exc:
        _fail(exc.format_message())


if __name__ == "__main__":
    main()
