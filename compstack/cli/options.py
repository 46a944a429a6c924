"""Every CLI option declared once, and the option groups that several commands share.

Each ``*_option`` factory is the one declaration of a flag (name, type, default, metavar);
a command that words a flag's help differently passes ``help=``. An option group
(:func:`model_options`, :func:`run_options`, :func:`kernel_job_options`,
:func:`explain_options`) is a decorator that adds its flags and hands the command one typed
dataclass (:class:`ModelFlags`, :class:`RunFlags`, ...) instead of loose keyword values.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

__all__ = [
    "ExplainFlags", "Finite", "KernelJobFlags", "ModelFlags", "RunFlags",
    "atol_option", "cache_dir_option", "db_option", "explain_options", "json_option", "junit_option",
    "kernel_job_options", "memory_limit_option", "min_runs_option", "min_time_option", "model_options",
    "no_cache_option", "opset_option", "run_options", "rtol_option", "seed_option", "target_opts_option",
    "target_option", "targets_option", "threads_option", "timeout_option", "warmup_option",
]

F = TypeVar("F", bound=Callable[..., Any])
Decorator = Callable[[F], F]


class Finite(click.ParamType):
    """A finite float within [lo, hi] (click's FloatRange lets NaN and inf through)."""

    name = "float"

    def __init__(self, lo: float = float("-inf"), hi: float = float("inf"), lo_open: bool = False) -> None:
        self.lo, self.hi, self.lo_open = lo, hi, lo_open

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        """``value`` as a float; click's one-line usage error when not finite or out of range."""
        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(x) or x < self.lo or x > self.hi or (self.lo_open and x == self.lo):
            lo = f"> {self.lo:g}" if self.lo_open else f">= {self.lo:g}"
            self.fail(f"{value} is not a finite number {lo} and <= {self.hi:g}", param, ctx)
        return x


# ---------------------------------------------------------------------------------------
# single options: the one declaration of each flag

def timeout_option(default: float = 900, help: str = "Wall-clock limit of one target's job, seconds.") -> Decorator:
    """``--timeout SECONDS`` (a finite float in [1, 86400])."""
    return click.option("--timeout", type=Finite(1, 86400), default=default, show_default=True, help=help)


def memory_limit_option(help: str = "Resident-memory limit of one target's job, MiB (0: none) "
                                    "[default: 75% of RAM].") -> Decorator:
    """``--memory-limit MIB`` (None: 75 % of RAM, resolved when used)."""
    return click.option("--memory-limit", type=click.IntRange(min=0), default=None, help=help)


def cache_dir_option(help: str = "Cache folder [env COMPSTACK_CACHE_DIR].") -> Decorator:
    """``--cache-dir DIR``."""
    return click.option("--cache-dir", type=click.Path(file_okay=False), help=help)


def json_option(help: str = "Print as JSON.") -> Decorator:
    """``--json`` (the command's value is named ``as_json``)."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def db_option(help: str = "Results database [env COMPSTACK_DB].") -> Decorator:
    """``--db FILE``."""
    return click.option("--db", type=click.Path(dir_okay=False), help=help)


def no_cache_option(help: str) -> Decorator:
    """``--no-cache``."""
    return click.option("--no-cache", is_flag=True, help=help)


def target_opts_option(help: str = "A target option.") -> Decorator:
    """``--option TARGET:KEY=VALUE`` (repeatable; the value is named ``target_opts``)."""
    return click.option("--option", "target_opts", multiple=True, metavar="TARGET:KEY=VALUE", help=help)


def opset_option() -> Decorator:
    """``--opset N``."""
    return click.option("--opset", type=click.IntRange(min=1), default=None, metavar="N",
                        help="Upgrade the model the stacks get to ai.onnx opset N (ONNX version converter) "
                             "[default: each stack gets the model as written].")


def seed_option(help: str = "Seed of generated inputs.") -> Decorator:
    """``--seed N``."""
    return click.option("--seed", type=int, default=0, show_default=True, help=help)


def targets_option(help: str, default: str | None = "cpu") -> Decorator:
    """``--targets SPEC`` (the value is named ``targets_spec``); ``default=None`` gives it no
    default (the command then reads None and says what it falls back to)."""
    if default is None:
        return click.option("--targets", "targets_spec", help=help)
    return click.option("--targets", "targets_spec", default=default, show_default=True, help=help)


def target_option(required: bool = True, help: str = "One target; see `compstack targets`.") -> Decorator:
    """``--target NAME``."""
    return click.option("--target", "target", required=required, help=help)


def junit_option(help: str) -> Decorator:
    """``--junit FILE``."""
    return click.option("--junit", "junit", type=click.Path(dir_okay=False), help=help)


def rtol_option(help: str = "Relative tolerance for every float output.") -> Decorator:
    """``--rtol X``."""
    return click.option("--rtol", type=Finite(0, 1e6), help=help)


def atol_option(help: str = "Absolute tolerance for every float output.") -> Decorator:
    """``--atol X``."""
    return click.option("--atol", type=Finite(0, 1e30), help=help)


def warmup_option() -> Decorator:
    """``--warmup N``."""
    return click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True, help="Warm-up runs.")


def min_runs_option(help: str = "At least this many timed runs...") -> Decorator:
    """``--min-runs N``."""
    return click.option("--min-runs", type=click.IntRange(min=1), default=20, show_default=True, help=help)


def min_time_option(help: str = "...and at least this many seconds of timed runs.") -> Decorator:
    """``--min-time SECONDS``."""
    return click.option("--min-time", type=Finite(0, 3600), default=1.0, show_default=True, help=help)


#: ``--threads`` of compare/run/profile (its default is computed when used, not at import).
THREADS_HELP = ("Threads every stack gets, each by its own knob (ORT intra-op threads, TVM_NUM_THREADS, IREE "
                "task topology, XLA's CPU affinity, torch.set_num_threads; OMP/MKL env too); 0 leaves each "
                "stack at its own default. Requested and observed busy threads go into every row's flags. "
                "[default: this machine's physical cores, as ONNX Runtime picks; the other stacks would "
                "each pick differently]")


def threads_option() -> Decorator:
    """``--threads N`` (None: the physical cores, resolved when used)."""
    return click.option("--threads", type=click.IntRange(min=0, max=4096), default=None, metavar="N",
                        help=THREADS_HELP)


# ---------------------------------------------------------------------------------------
# option groups: one decorator, one typed value


def _group(cls: type, param: str, options: list[Decorator]) -> Decorator:
    """Add ``options`` (in help order) to a command and pass their values as one ``cls``
    instance in keyword ``param``; each option's value name is a field of ``cls``."""
    names = [f.name for f in dataclasses.fields(cls)]

    def decorate(f: F) -> F:
        @functools.wraps(f)
        def wrapper(*args: Any, **kw: Any) -> Any:
            kw[param] = cls(**{n: kw.pop(n) for n in names})
            return f(*args, **kw)

        out: Any = wrapper
        for opt in reversed(options):
            out = opt(out)
        return out  # type: ignore[no-any-return]

    return decorate


@dataclass(frozen=True)
class ModelFlags:
    """How a command gets the model and its inputs (``--seed`` ... ``--cache-dir``).

    Attributes:
        seed: seed of generated inputs.
        inputs_file: ``--inputs FILE.npz`` or None.
        val_ranges: ``--val-range NAME:LO,HI`` items, unparsed.
        input_shapes: ``--input-shape NAME:D0xD1`` items, unparsed.
        opset: ``--opset N`` or None.
        target_opts: ``--option TARGET:KEY=VALUE`` items, unparsed.
        cache_dir: ``--cache-dir`` or None (the environment's).
    """

    seed: int
    inputs_file: str | None
    val_ranges: tuple[str, ...]
    input_shapes: tuple[str, ...]
    opset: int | None
    target_opts: tuple[str, ...]
    cache_dir: str | None


def model_options(f: F) -> F:
    """``--seed --inputs --val-range --input-shape --opset --option --cache-dir`` as ``model: ModelFlags``."""
    return _group(ModelFlags, "model_flags", [
        seed_option(),
        click.option("--inputs", "inputs_file", type=click.Path(dir_okay=False),
                     help="Input arrays by name (.npz) instead of generated ones."),
        click.option("--val-range", "val_ranges", multiple=True, metavar="NAME:LO,HI",
                     help="Value range of a generated input (repeatable), as in Polygraphy."),
        click.option("--input-shape", "input_shapes", multiple=True, metavar="NAME:D0xD1...",
                     help="Shape for an input with dynamic dims (repeatable)."),
        opset_option(),
        target_opts_option("A target option, e.g. ort-cpu:opt_level=basic (repeatable)."),
        cache_dir_option("Artifact/zoo cache folder [env COMPSTACK_CACHE_DIR; default ~/.cache/compstack]."),
    ])(f)


@dataclass(frozen=True)
class RunFlags:
    """How compare/run/sweep run each target's job and what they write.

    Attributes:
        threads: ``--threads`` (None: the physical cores).
        as_json: ``--json``.
        db: ``--db`` or None (the environment's).
        no_cache: ``--no-cache``.
        timeout: ``--timeout``, seconds.
        memory_limit: ``--memory-limit``, MiB (None: 75 % of RAM).
        rtol, atol: tolerance overrides or None.
        reference: ``auto``, ``reference`` or a target.
        no_latency: ``--no-latency``.
        warmup, min_runs, min_time: the latency protocol (``min_time`` in seconds).
        save_inputs, save_outputs: ``.npz`` paths or None.
    """

    threads: int | None
    as_json: bool
    db: str | None
    no_cache: bool
    timeout: float
    memory_limit: int | None
    rtol: float | None
    atol: float | None
    reference: str
    no_latency: bool
    warmup: int
    min_runs: int
    min_time: float
    save_inputs: str | None
    save_outputs: str | None


def run_options(f: F) -> F:
    """``--threads --json --db --no-cache --timeout ... --save-outputs`` as ``run_flags: RunFlags``."""
    return _group(RunFlags, "run_flags", [
        threads_option(),
        json_option("Print the run as JSON on stdout, nothing else."),
        db_option("Results database [env COMPSTACK_DB; default .compstack/results.sqlite]."),
        no_cache_option("Compile everything anew; neither read nor write the cache."),
        timeout_option(),
        memory_limit_option(),
        rtol_option(),
        atol_option(),
        click.option("--reference", default="auto", show_default=True,
                     help="auto (float64 onnx.reference when small enough, else ort-cpu), reference, or a target."),
        click.option("--no-latency", is_flag=True, help="Skip latency measurement."),
        warmup_option(),
        min_runs_option(),
        min_time_option(),
        click.option("--save-inputs", type=click.Path(dir_okay=False), help="Write input set 0 to this .npz."),
        click.option("--save-outputs", type=click.Path(dir_okay=False),
                     help="Write every target's outputs to this .npz (keys TARGET::OUTPUT)."),
    ])(f)


@dataclass(frozen=True)
class KernelJobFlags:
    """The flags of ``fusion`` and ``profile`` jobs.

    Attributes:
        opset, target_opts, as_json, cache_dir, timeout, memory_limit: as in
            :class:`ModelFlags` / :class:`RunFlags`.
        trt_profile: trtexec ``--exportProfile`` JSON or None.
        trt_layer_info: trtexec ``--exportLayerInfo`` JSON or None.
    """

    opset: int | None
    target_opts: tuple[str, ...]
    as_json: bool
    cache_dir: str | None
    timeout: float
    memory_limit: int | None
    trt_profile: str | None
    trt_layer_info: str | None


def kernel_job_options(f: F) -> F:
    """``--opset --option --json --cache-dir --timeout --memory-limit --trt-profile
    --trt-layer-info`` as ``job_flags: KernelJobFlags``."""
    return _group(KernelJobFlags, "job_flags", [
        opset_option(),
        target_opts_option("A target option (repeatable)."),
        json_option("Print everything as JSON on stdout, nothing else."),
        cache_dir_option(),
        timeout_option(),
        memory_limit_option(),
        click.option("--trt-profile", type=click.Path(dir_okay=False),
                     help="Add TensorRT as a row: trtexec --exportProfile JSON from a GPU machine."),
        click.option("--trt-layer-info", type=click.Path(dir_okay=False),
                     help="...and its trtexec --exportLayerInfo JSON (--profilingVerbosity=detailed)."),
    ])(f)


@dataclass(frozen=True)
class ExplainFlags:
    """The flags of ``explain``, ``reduce`` and ``bisect``.

    Attributes:
        targets_spec: ``--targets`` or None (required unless ``--replay``).
        keep: the ``--keep`` property or None.
        time_budget: ``--time-budget`` text (``90s``, ``10m``) or None.
        timeout: limit of one compile-and-run, seconds.
        rtol, atol: verdict tolerances or None (1e-3, 1e-5).
        as_json: ``--json``.
    """

    targets_spec: str | None
    keep: str | None
    time_budget: str | None
    timeout: float
    rtol: float | None
    atol: float | None
    as_json: bool


def explain_options(f: F) -> F:
    """``--targets --keep --time-budget --timeout --rtol --atol --json`` as ``explain_flags: ExplainFlags``."""
    return _group(ExplainFlags, "explain_flags", [
        targets_option("Comma-separated targets or aliases to explain.", default=None),
        click.option("--keep", help="The property to keep, e.g. 'xla-cpu!=ref,ort-cpu==ref' "
                                    "[default: the first wrong target !=ref]."),
        click.option("--time-budget", help="Stop reducing after this long (90s, 10m, 1h) [default: no limit]."),
        timeout_option(300, "Wall-clock limit of one compile-and-run of a piece, seconds."),
        rtol_option("Relative tolerance of the verdict [1e-3]."),
        atol_option("Absolute tolerance of the verdict [1e-5]."),
        json_option("Print the explanation as JSON on stdout, nothing else."),
    ])(f)
