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
    "target_option", "targets_option", "threads_option", "timeout_option", "warmup_option", "wide_option",
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


class _Opset(click.ParamType):
    """An ai.onnx opset number the installed ``onnx`` can convert to: 1 to
    ``onnx.defs.onnx_opset_version()`` (the range of ONNX's version converter)."""

    name = "opset"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        import onnx.defs

        newest = onnx.defs.onnx_opset_version()
        try:
            n = int(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not an opset number (an integer from 1 to {newest})", param, ctx)
        if not 1 <= n <= newest:
            self.fail(f"{n} is not an ai.onnx opset this onnx {onnx.__version__} knows (1 to {newest})", param, ctx)
        return n


def opset_option() -> Decorator:
    """``--opset N``."""
    return click.option("--opset", type=_Opset(), default=None, metavar="N",
                        help="Upgrade the model the stacks get to ai.onnx opset N (ONNX version converter) "
                             "[default: each stack gets the model as written].")


def seed_option(help: str = "Seed of generated inputs.") -> Decorator:
    """``--seed N``."""
    # numpy's generators take seeds >= 0; SQLite integers are 64-bit signed
    return click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=0, show_default=True, help=help)


def targets_option(help: str, default: str | None = "cpu", both: bool = True) -> Decorator:
    """``--targets SPEC``, also spelled ``--target`` unless ``both=False`` (the value is
    named ``targets_spec``); ``default=None`` gives it no default (the command then reads
    None and says what it falls back to)."""
    names = ("--targets", "--target") if both else ("--targets",)

    def joined(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> str | None:
        # each --target/--targets adds its targets (given twice, neither is silently dropped)
        return ",".join(value) if value else default

    return click.option(*names, "targets_spec", multiple=True, callback=joined, metavar="SPEC",
                        help=help + (f"  [default: {default}]" if default else "") + " May be given more than once.")


def target_option(required: bool = True, help: str = "One target; see `compstack targets`.",
                  both: bool = True) -> Decorator:
    """``--target NAME``, also spelled ``--targets`` unless ``both=False`` (one spelling per
    idea is the user's choice: every command takes both, as the issue #28 part 4 asks)."""
    names = ("--target", "--targets") if both else ("--target",)

    def one(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> str | None:
        from compstack.core.errors import UserError

        if len(set(value)) > 1:  # the last one would win silently
            raise UserError(f"--target given {len(value)} times ({', '.join(value)}): this command takes one target")
        return value[0] if value else None

    return click.option(*names, "target", multiple=True, callback=one, required=required, metavar="NAME", help=help)


def wide_option() -> Decorator:
    """``--wide``: every column of the result table (the terminal default is the compact one)."""
    return click.option("--wide", is_flag=True,
                        help="Every column (compile, p10/p90, CI, cv, threads, errors); on a terminal the default "
                             "is a compact table that fits 80 columns, on a pipe every column.")


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
        latency_budget: ``--latency-budget``, seconds of the whole latency phase per
            target, warm-up included (:class:`compstack.core.latency.LatencyConfig`).
        save_inputs, save_outputs: ``.npz`` paths or None.
        tuned: ``--tuned``; budget: ``--budget`` (a duration) or None.
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
    latency_budget: float
    save_inputs: str | None
    save_outputs: str | None
    tuned: bool
    budget: str | None


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
                     help="auto (float64 onnx.reference when small enough, else eager-float64), reference, "
                          "eager-float64 (compstack's translated program run eagerly in float64 by PyTorch), "
                          "or a target (in float32)."),
        click.option("--no-latency", is_flag=True, help="Skip latency measurement."),
        warmup_option(),
        min_runs_option(),
        min_time_option(),
        click.option("--latency-budget", type=Finite(1, 86400), default=120.0, show_default=True,
                     help="Seconds the latency phase of one target may take, warm-up included (at least 3 timed "
                          "runs unless --timeout comes first)."),
        click.option("--save-inputs", type=click.Path(dir_okay=False), help="Write input set 0 to this .npz."),
        click.option("--save-outputs", type=click.Path(dir_okay=False),
                     help="Write every target's outputs to this .npz (keys TARGET::OUTPUT)."),
        click.option("--tuned", is_flag=True,
                     help="Each stack at its best: TVM MetaSchedule for --budget, Inductor max-autotune, IREE O3 + "
                          "data tiling + ukernels, OpenVINO's LATENCY hint, ORT_ENABLE_ALL; every row says what it "
                          "meant (flags.tuned_as). Your --option values win."),
        click.option("--budget", default=None, metavar="DURATION",
                     help="With --tuned: the tuning budget per model and stack (90s, 5m, 1h), added to its --timeout "
                          "[default: 5m]."),
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


#: Per command (``explain``, ``reduce``, ``bisect``: the decorated function's name), what its
#: ``--targets`` act on and what its ``--time-budget`` does (bisect never reads the deadline).
_EXPLAIN_WORDS = {"explain": ("to explain", "Stop reducing after this long"),
                  "reduce": ("to reduce the model on", "Stop reducing after this long"),
                  "bisect": ("to bisect", ("Not used by bisect (about log2(nodes) + 2 compiles); explain and "
                                           "reduce stop reducing after this long"))}


def explain_options(f: F) -> F:
    """``--targets --keep --time-budget --timeout --rtol --atol --json`` as ``explain_flags: ExplainFlags``."""
    what, stop = _EXPLAIN_WORDS.get(getattr(f, "__name__", ""), _EXPLAIN_WORDS["explain"])
    return _group(ExplainFlags, "explain_flags", [
        targets_option(f"Comma-separated targets or aliases {what}.", default=None),
        click.option("--keep", help="The property to keep, e.g. 'xla-cpu!=ref,ort-cpu==ref' "
                                    "[default: the first wrong target !=ref]."),
        click.option("--time-budget", help=f"{stop} (90s, 10m, 1h) [default: no limit]."),
        timeout_option(300, "Wall-clock limit of one compile-and-run of a piece, seconds."),
        rtol_option("Relative tolerance of the verdict [1e-3]."),
        atol_option("Absolute tolerance of the verdict [1e-5]."),
        json_option("Print the explanation as JSON on stdout, nothing else."),
    ])(f)
