"""The Python API: what the ``compstack`` commands do, as typed functions (issue #12, part 5).

``import compstack`` re-exports these names lazily (see ``compstack/__init__.py``), so
``compstack.compare("zoo:mlp", "ort-cpu,tvm-llvm")`` works without importing six modules.
The CLI (:mod:`compstack.cli`) is a thin layer over these functions: it parses flags into
the option dataclasses below and prints what they return.

A stack is imported when one of its targets runs, in a worker process (unless an
``isolate=False`` option says otherwise); only :func:`target_rows` (and resolving a target's
options) imports stacks in this process, to ask them about themselves.
Bad input raises :class:`~compstack.core.errors.UserError` with a one-line message.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compstack.core.config import settings as _settings
from compstack.core.errors import UserError
from compstack.core.ir import SourceModel, onnx  # onnx: loaded by core.ir anyway
from compstack.core.latency import LatencyConfig
from compstack.core.results import Report, Result, ResultsDB
from compstack.fusion.run import KernelsOptions, TargetKernels
from compstack.run.dump import DumpResult
from compstack.run.releases import provision_single
from compstack.run.runner import Limits
from compstack.run.session import CompareOptions, check_reference
from compstack.targets.base import LowerRequest, Target

__all__ = [
    "CompareOptions", "DumpResult", "KernelsOptions", "LatencyConfig", "Limits", "LowerOptions", "LowerRequest",
    "Report", "Result", "SourceModel", "Target", "TargetKernels",
    "compare", "default_memory_mb", "dump", "explain_feeds", "explain_model", "kernels", "load_model", "lower",
    "profile", "resolve_target", "resolve_targets", "run_conformance", "target_rows", "validate_target_options",
]

#: A model: a spec (``zoo:NAME``, ``file.onnx``, ``file.py:function``), a path, or an imported model.
ModelLike = str | Path | SourceModel | onnx.ModelProto
#: A file or folder name.
PathLike = str | Path


def default_memory_mb() -> int:
    """The default resident-memory limit of one job: 75 % of this machine's RAM, in MiB
    (0, meaning no limit, when ``/proc/meminfo`` cannot be read)."""
    from compstack.run.runner import default_memory_mb as _default

    return _default()


def _memory(memory_mb: int | None) -> int:
    return default_memory_mb() if memory_mb is None else memory_mb


def load_model(spec: ModelLike, *, cache_dir: PathLike | None = None, timeout_s: float | None = 900.0,
               memory_mb: int | None = None, partial: bool = False) -> SourceModel:
    """Import a model into the common IR.

    Args:
        spec: ``zoo:NAME``, ``file.onnx``, ``file.py:function`` (a path: a file name) or an
            ``onnx.ModelProto``; an imported :class:`SourceModel` is returned as it is.
        cache_dir: the cache folder (zoo exports) [default: ``COMPSTACK_CACHE_DIR``, else
            ``$XDG_CACHE_HOME/compstack``].
        timeout_s: wall-clock limit, seconds, of the worker process a ``file.py:function``
            runs in (None: it runs in this process).
        memory_mb: resident-memory limit of that worker, MiB (0: none; None: 75 % of RAM).
        partial: a JAX program whose jaxpr does not convert to the common IR is returned
            with ``import_error`` set instead of raising (its native XLA path still runs).

    Returns:
        The :class:`SourceModel` (``.model`` is the canonical IR, ``.fingerprint`` its hash).

    Raises:
        UserError: unknown zoo name, missing or malformed file, a ``file.py:function`` that
            fails or passes its limits, a ``spec`` of another type.
    """
    if isinstance(spec, SourceModel):
        return spec
    from compstack.frontends.sources import resolve_model

    return resolve_model(spec, cache_dir=_settings(cache_dir=cache_dir).cache_dir, timeout_s=timeout_s,
                         memory_mb=_memory(memory_mb), partial=partial)


def resolve_targets(targets: str | Sequence[str], cache_dir: PathLike | None = None) -> list[str]:
    """Target names from a spec: comma-separated names or aliases (``cpu``, ``all``), or a
    sequence of them; see ``compstack targets``. A lone ``TARGET@VERSION``'s env is built now, in ``cache_dir``.

    Raises:
        UserError: an unknown target or alias; a lone release that cannot be provisioned.
    """
    from compstack import targets as registry
    return provision_single(registry.resolve(targets if isinstance(targets, str) else ",".join(targets)),
                            str(cache_dir) if cache_dir is not None else None)


def resolve_target(target: str, flag: str = "--target") -> str:
    """Exactly one target name from ``target`` (a name, or an alias naming one target).

    Raises:
        UserError: unknown, or naming several targets (the message names ``flag``).
    """
    from compstack import targets as registry

    names = registry.resolve(target)
    if len(names) != 1:
        raise UserError(f"{flag} {target}: names {len(names)} targets ({', '.join(names)}); give one")
    return provision_single(names)[0]  # a release that cannot install: one line, exit 2


def validate_target_options(options: Mapping[str, Mapping[str, str]]) -> None:
    """Check ``{target: {option: value}}`` against each target's ``Options`` class.

    Raises:
        UserError: an unknown target, option name or bad value.
    """
    from compstack import targets as registry

    for target, kv in options.items():
        registry.get(target).Options.from_strings(dict(kv), owner=target)


def target_rows() -> list[dict[str, Any]]:
    """Every registered target as ``compstack targets --json`` prints it: name, device,
    availability and why not, aliases, versions. Imports each installed stack to ask it."""
    from compstack.report.tables import target_rows as rows

    return rows()


def _check_writable_file(path: PathLike | None, flag: str) -> None:
    if path:
        from compstack.core.integrity import probe_dir

        probe_dir(Path(path).resolve().parent, f"{flag} {os.fspath(path)}: folder not writable")


def _add_framework_row(targets: list[str], spec: str, framework: str) -> None:
    """A TensorFlow/Paddle/MindSpore model compared on ``cpu`` or ``all`` also runs in its own
    framework (the ``tf``/``paddle``/``mindspore`` row); named targets are left as given."""
    aliases = {t.strip() for t in spec.split(",")}
    if framework in ("tf", "paddle", "mindspore") and aliases & {"cpu", "all"} and framework not in targets:
        targets.append(framework)


def compare(model: ModelLike, targets: str | Sequence[str] | None = None, *, options: CompareOptions | None = None,
            cache_dir: PathLike | None = None, db: PathLike | None = None,
            save_inputs: PathLike | None = None, save_outputs: PathLike | None = None,
            on_start: Callable[[str], None] | None = None,
            on_result: Callable[[Result], None] | None = None) -> Report:
    """Compare targets on a model: numerics against the reference, compile time, latency (``compstack compare``).

    Args:
        model: see :func:`load_model` (a ``file.py`` JAX program that does not import still runs its native path).
        targets: names or aliases (``"cpu"``, ``"ort-cpu,tvm-llvm"``, ``["xla-cpu"]``);
            they replace ``options.targets`` [default: ``options.targets``, else ``"cpu"``].
        options: seed, inputs, tolerances, latency protocol (``latency=None`` skips timing), limits, target
            options, threads; see :class:`CompareOptions`.
        cache_dir: cache folder [default: ``COMPSTACK_CACHE_DIR``, else ``~/.cache/compstack``].
        db: results database [default: ``COMPSTACK_DB``, else ``.compstack/results.sqlite``].
        save_inputs: write input set 0 to this ``.npz``.
        save_outputs: write every target's outputs to this ``.npz`` (keys ``TARGET::OUTPUT``).
        on_start: progress callback, called with a target name as its job starts.
        on_result: progress callback, called with each finished row.

    Returns:
        The :class:`Report`: one :class:`Result` per target (``status`` is ``ok``,
        ``mismatch``, ``failed``, ``crashed``, ``timeout``, ``oom``, ``unsupported`` or
        ``unavailable``; a stack's failure is a row, never an exception), already stored.

    Raises:
        UserError: bad model, targets, options or output paths.
    """
    from compstack import targets as registry
    from compstack.core.errors import UserError
    from compstack.run.session import compare as run_compare

    if options is not None and not isinstance(options, CompareOptions):
        raise UserError(f"compare: options must be a CompareOptions, not {type(options).__name__}")
    if targets is None and options is not None and options.targets:
        targets = options.targets if isinstance(options.targets, str) else list(options.targets)
    targets = "cpu" if targets is None else targets
    if not isinstance(targets, str) and not (isinstance(targets, Sequence)
                                             and all(isinstance(t, str) for t in targets)):
        raise UserError(f"compare: targets must be a name, a comma-separated string or a list of names, "
                        f"not {targets!r}")
    spec = targets if isinstance(targets, str) else ",".join(targets)
    if options is not None:
        _check_compare_options(options)
    names = registry.resolve(spec)
    opts = CompareOptions(targets=names) if options is None else options
    check_reference(opts.reference, cache_dir)
    _check_writable_file(save_inputs, "--save-inputs")
    _check_writable_file(save_outputs, "--save-outputs")
    cfg = _settings(cache_dir=cache_dir, db=db)
    validate_target_options(opts.target_options)
    import dataclasses

    opts = dataclasses.replace(opts, targets=list(names))
    source = load_model(model, cache_dir=cfg.cache_dir, timeout_s=opts.limits.timeout_s,
                        memory_mb=opts.limits.memory_mb, partial=True)
    _add_framework_row(opts.targets, spec, source.framework)
    return run_compare(source, opts, cfg, on_start=on_start, on_result=on_result,
                       save_outputs=Path(save_outputs) if save_outputs else None,
                       save_inputs=Path(save_inputs) if save_inputs else None)


def _check_compare_options(opts: CompareOptions) -> None:
    """What the CLI's option types check, for options built in Python: tolerances >= 0 and
    a latency protocol that times at least one run.

    Raises:
        UserError: naming the field and value.
    """
    from compstack.core.errors import UserError

    for name in ("rtol", "atol"):
        value = getattr(opts, name, None)
        if value is not None and not (isinstance(value, (int, float)) and value >= 0):
            raise UserError(f"CompareOptions.{name}={value!r}: a tolerance is a number >= 0")
    lat = getattr(opts, "latency", None)
    if lat is not None:
        for name, low in (("warmup", 0), ("min_runs", 1), ("max_runs", 1), ("min_time_s", 0)):
            value = getattr(lat, name, None)
            if value is not None and value < low:
                raise UserError(f"LatencyConfig.{name}={value!r}: at least {low}")


@dataclass
class LowerOptions:
    """What :func:`lower` needs besides the model, the target and the folder.

    Attributes:
        target_options: the target's options as strings (``{"opt_level": "basic"}``).
        seed: seed of the generated example input the artifact is checked with.
        opset: upgrade the model the stack gets to this ai.onnx opset (None: as written).
        timeout_s: wall-clock limit of the job, seconds.
        memory_mb: resident-memory limit of the job, MiB (0: none; None: 75 % of RAM).
        cache_dir: the cache folder (None: the default, see :func:`compare`).
    """

    target_options: Mapping[str, str] = field(default_factory=dict)
    seed: int = 0
    opset: int | None = None
    timeout_s: float = 900.0
    memory_mb: int | None = None
    cache_dir: PathLike | None = None


def lower(model: ModelLike, target: str, out_dir: PathLike, options: LowerOptions | None = None) -> dict[str, Any]:
    """Lower and compile a model for one target; write the artifact, the stage dumps and
    ``manifest.json`` to ``out_dir`` (``compstack lower``).

    Returns:
        The manifest (also in ``out_dir/manifest.json``): ``status`` (``ok`` or the
        failure), ``stage``, ``error``, ``artifacts``, ``stages``, and for a failure the
        failing stage, log tail, reproducing command and hint.

    Raises:
        UserError: bad model, target, options, or an unwritable ``out_dir``.
    """
    from compstack.core.outdir import claim_dir
    from compstack.run.lower import lower_to_folder

    opts = options or LowerOptions()
    name = resolve_target(target)
    validate_target_options({name: opts.target_options} if opts.target_options else {})
    out = claim_dir(out_dir, "lower").path  # refused before the import; lower_to_folder records what it wrote
    source = load_model(model, cache_dir=opts.cache_dir, timeout_s=opts.timeout_s, memory_mb=opts.memory_mb)
    # run.lower reads these keys (its signature predates the typed options; see its docstring)
    return lower_to_folder(source, name, out, dict(opts.target_options),
                           {"cache_dir": os.fspath(opts.cache_dir) if opts.cache_dir else None, "seed": opts.seed,
                            "opset": opts.opset, "timeout": opts.timeout_s, "memory_limit": _memory(opts.memory_mb)})


def dump(model: ModelLike, target: str, out_dir: PathLike | None = None, *, stages: Sequence[str] | None = None,
         passes: str = "", target_options: Mapping[str, str] | None = None, cache_dir: PathLike | None = None,
         timeout_s: float = 900.0, memory_mb: int | None = None) -> DumpResult:
    """Dump the IR of a model on one target at its stages, optionally after every pass
    (``compstack dump``).

    Args:
        stages: stage names (see ``compstack stages --target T``); None: every stage.
        passes: ``""`` (stages only), ``"all"`` (the IR after every pass, with timing) or
            ``"changed"`` (after each pass that changed it).
        out_dir: where to write; None: a fresh temporary folder (the caller removes it).

    Returns:
        A :class:`DumpResult`: ``outcome.status`` (``ok`` or the stack's failure),
        ``stages`` (stage -> file), ``passes`` and ``timing`` rows.

    Raises:
        UserError: bad model, target, stage names, options or ``passes``; an unwritable folder.
    """
    from compstack.core.outdir import claim_dir
    from compstack.core.procs import run_tempdir
    from compstack.run.dump import check_stages
    from compstack.run.dump import dump as run_dump

    if passes not in ("", "all", "changed"):
        raise UserError(f"passes {passes!r}: expected '', 'all' or 'changed'")
    name = resolve_target(target)
    validate_target_options({name: target_options} if target_options else {})
    check_stages(name, list(stages or ()))
    out = claim_dir(out_dir if out_dir is not None else run_tempdir("compstack-dump-"), "dump")  # core.outdir
    cfg = _settings(cache_dir=cache_dir)
    source = load_model(model, cache_dir=cfg.cache_dir, timeout_s=timeout_s, memory_mb=memory_mb)
    return out.done(run_dump(source, name, out.path, stages=list(stages) if stages else None, passes=passes,
                             options=dict(target_options or {}), cache_dir=cfg.cache_dir,
                             limits=Limits(timeout_s=timeout_s, memory_mb=_memory(memory_mb))))


def _kernels(model: ModelLike, targets: str | Sequence[str], options: KernelsOptions | None, profile_run: bool,
             cache_dir: PathLike | None, on_start: Callable[[str], None] | None,
             on_done: Callable[[TargetKernels], None] | None) -> list[TargetKernels]:
    import dataclasses

    from compstack.fusion.run import collect

    names = resolve_targets(targets, cache_dir)
    opts = dataclasses.replace(options or KernelsOptions(targets=[]), targets=names, profile=profile_run)
    validate_target_options(opts.target_options)
    cfg = _settings(cache_dir=cache_dir)
    source = load_model(model, cache_dir=cfg.cache_dir, timeout_s=opts.limits.timeout_s,
                        memory_mb=opts.limits.memory_mb)
    return collect(source, opts, cfg, on_start=on_start, on_done=on_done)


def kernels(model: ModelLike, targets: str | Sequence[str] = "cpu", *, options: KernelsOptions | None = None,
            cache_dir: PathLike | None = None, on_start: Callable[[str], None] | None = None,
            on_done: Callable[[TargetKernels], None] | None = None) -> list[TargetKernels]:
    """Map every kernel/dispatch/fusion of each target back to the model's nodes (the data
    of ``compstack fusion``).

    Returns:
        One :class:`TargetKernels` per target: ``status``, ``kernels`` (the kernel map, or
        None when the stack failed or has no map), ``error``.

    Raises:
        UserError: bad model, targets or options.
    """
    return _kernels(model, targets, options, False, cache_dir, on_start, on_done)


def profile(model: ModelLike, targets: str | Sequence[str] = "cpu", *, options: KernelsOptions | None = None,
            cache_dir: PathLike | None = None, on_start: Callable[[str], None] | None = None,
            on_done: Callable[[TargetKernels], None] | None = None) -> list[TargetKernels]:
    """Time every kernel of the model on each target with the stack's own profiler (the data
    of ``compstack profile``): as :func:`kernels`, with ``profile`` (per-kernel times,
    milliseconds, median over ``options.latency``'s runs) filled in where the stack has one.

    Raises:
        UserError: bad model, targets or options.
    """
    return _kernels(model, targets, options, True, cache_dir, on_start, on_done)


def run_conformance(targets: str | Sequence[str] = "cpu", *, pattern: str | None = None, sample: int | None = None,
                    seed: int = 0, workers: int | None = None, timeout_s: float = 120.0,
                    xfail_dir: PathLike | None = None, update_xfail: bool = False,
                    target_options: Mapping[str, Mapping[str, str]] | None = None, cache: bool = True,
                    cache_dir: PathLike | None = None, db: PathLike | None = None, junit: PathLike | None = None,
                    on_result: Callable[[str, dict[str, Any]], None] | None = None,
                    on_target: Callable[[str, int], None] | None = None) -> Any:
    """Run the ONNX node tests on each target (``compstack conformance``), writing the run
    to the results database as it goes (each case's row the moment it is known).

    Args:
        pattern: only cases whose name matches this regular expression.
        sample: a fixed random sample of this many cases (after ``pattern``), drawn with ``seed``.
        workers: worker processes per target [default: cores].
        timeout_s: wall-clock limit per case (import to compare), seconds.
        xfail_dir: folder of XFAIL files [default: the shipped ones]; ``update_xfail``
            records this run's failures there.
        cache: reuse compiled cases from the cache.
        junit: also write JUnit XML here (a testsuite per target).
        on_result: progress callback, called with (target, case row) as each case finishes.
        on_target: progress callback, called with (target, a count) per target.

    Returns:
        The :class:`compstack.conformance.suite.SuiteReport`: a summary per target
        (funnel counts, ``regressions``: failures not in the XFAIL file) and every case's row.

    Raises:
        UserError: bad targets, options, pattern, database or folders; no case selected.
    """
    from compstack import targets as registry
    from compstack.conformance import suite
    from compstack.conformance.cases import cases_path, load_cases, select
    from compstack.core.integrity import probe_dir

    cfg = _settings(cache_dir=cache_dir, db=db)
    names = registry.resolve(targets if isinstance(targets, str) else ",".join(targets))
    topts = target_options or {}
    validate_target_options(topts)
    if pattern:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise UserError(f"--filter {pattern!r}: not a regular expression ({exc})") from None
    probe_dir(cfg.cache_dir, f"cache folder {cfg.cache_dir}: not writable")  # the cases are cached there
    suite.trend(cfg.db)  # a folder, or a database that is not ours, fails before the run, not after it
    all_cases = load_cases(cfg.cache_dir)
    cases = select(all_cases, pattern, sample, seed)
    if not cases:
        raise UserError(f"--filter {pattern!r}: matches none of the {len(all_cases)} cases")
    _check_writable_file(junit, "--junit")
    results = ResultsDB(cfg.db, cfg.db_busy_timeout_s)  # written row by row: a killed run keeps its finished cases
    try:
        report = suite.run_suite(cases, cases_path(cfg.cache_dir), names, workers=workers or os.cpu_count() or 1,
                                 timeout=timeout_s, cache_dir=cfg.cache_dir if cache else None,
                                 xfail_dir=Path(xfail_dir) if xfail_dir else suite.DEFAULT_XFAIL_DIR,
                                 update_xfail=update_xfail, target_options={k: dict(v) for k, v in topts.items()},
                                 on_result=on_result, on_target=on_target,
                                 selection={"filter": pattern, "sample": sample, "seed": seed,
                                            "total_available": len(all_cases)}, db=results)
    finally:
        results.close()
    if junit:
        from compstack.report.junit import conformance_junit, write_junit

        write_junit(Path(junit), conformance_junit(report))
    return report


def explain_feeds(source: SourceModel, *, inputs: Mapping[str, Any] | None = None,
                  val_ranges: Mapping[str, tuple[float, float]] | None = None,
                  shapes: Mapping[str, tuple[int, ...]] | None = None, seed: int = 0) -> dict[str, Any]:
    """The one input set explain runs on: ``inputs`` (checked against the model), else the
    model's own example inputs (when no range or shape is given), else arrays generated
    with ``seed`` within ``val_ranges`` (over the model's own) and ``shapes``.

    Returns:
        ``{input name: numpy array}``.

    Raises:
        UserError: inputs that do not match the model's names, dtypes or shapes.
    """
    from compstack.core import ir as cir
    from compstack.core.inputs import check_feeds, input_sets

    model_inputs = cir.graph_inputs(source.model)
    ranges = {**source.val_ranges, **(val_ranges or {})}
    first = None
    if inputs is not None:
        first = dict(inputs)
        check_feeds(model_inputs, first, "--inputs")
    elif source.example_inputs and not val_ranges and not shapes:
        first = source.example_inputs
    return input_sets(model_inputs, 1, seed, first, ranges, dict(shapes or {}))[0]


def explain_model(model: ModelLike, targets: str | Sequence[str], *, keep: str | None = None,
                  steps: str = "all", time_budget_s: float = float("inf"), out_dir: PathLike | None = None,
                  timeout_s: float = 300.0, rtol: float | None = None, atol: float | None = None,
                  target_options: Mapping[str, Mapping[str, str]] | None = None,
                  feeds: Mapping[str, Any] | None = None, cache_dir: PathLike | None = None,
                  on_progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Why targets disagree with the float64 reference (``compstack explain``; ``steps``
    ``"bisect"`` or ``"reduce"`` run one step, as ``compstack bisect``/``reduce`` do).

    Args:
        keep: the property to keep, e.g. ``"xla-cpu!=ref"`` [default: the first wrong target].
        time_budget_s: stop reducing after this many seconds.
        out_dir: write an upstream-ready bundle here (reduced model, data, repro scripts, ISSUE.md).
        timeout_s: limit of one compile-and-run of a piece, seconds.
        rtol: the user's relative tolerance override of the verdict (None: per-dtype defaults).
        atol: the user's absolute tolerance override (None: per-dtype defaults).
        feeds: the input set (default: :func:`explain_feeds` of the model).

    Returns:
        The explanation as a JSON-able dict: ``verdict``, ``found``, first divergent node,
        reduced node counts, ``culprit``, ``compiles``, ``seconds``; ``reduced`` holds the
        reduced ``onnx.ModelProto`` (when there is one).

    Raises:
        UserError: bad model, targets, ``keep`` property, options or folder.
    """
    from compstack.core import ir as cir
    from compstack.explain import explain
    from compstack.ops._registry import origins_for

    names = resolve_targets(targets, cache_dir)
    if keep:
        from compstack.explain.keep import parse_keep

        parse_keep(keep, names)
    validate_target_options(target_options or {})
    source = load_model(model, cache_dir=cache_dir)
    values = dict(feeds) if feeds is not None else explain_feeds(source)
    return explain(cir.to_proto(source.model), values, names, keep=keep, target_options=target_options,
                   time_budget_s=time_budget_s, out_dir=Path(out_dir) if out_dir else None, steps=steps,
                   model_name=source.name, timeout_s=timeout_s, op_origins=origins_for(source.model),
                   rtol=rtol, atol=atol, on_progress=on_progress)
