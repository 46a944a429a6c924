"""``compstack ops list|test|build``: the custom-op registry, its per-stack test, its kernel build."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from compstack.cli.options import json_option, seed_option, timeout_option
from compstack.core.errors import CompstackError, UserError

__all__ = ["ops"]


@click.group(short_help="Custom ops: list them, test every stack against the reference, build the kernels.")
def ops() -> None:
    """Custom ops declared with compstack.ops.custom_op (compstack's own: compstack::rms_norm,
    compstack::bias_gelu). --load FILE.py|MODULE imports a user's declarations first.

    Examples:

        \b
        compstack ops list
        compstack ops test compstack::rms_norm
        compstack ops build --load my_ops.py
    """


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
@json_option()
@_LOAD
def ops_list(as_json: bool, modules: tuple[str, ...]) -> None:
    """Every registered custom op: signature, attributes, kernels, and per stack how it
    runs the op or why it cannot.

    Examples:

        \b
        compstack ops list
        compstack ops list --load my_ops.py --json
    """
    from compstack.ops import all_ops
    from compstack.ops._info import describe

    _load_ops(modules)
    from compstack import targets as registry

    rows = [describe(op, registry.custom_op_support(op.kernels)) for op in all_ops()]
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
@click.option("--targets", "--target", "targets_spec", default=None,  # None: `ops test` picks its own five
              help="Comma-separated targets [default: ort-cpu,tvm-llvm,iree-llvm-cpu,xla-cpu,inductor-cpu].")
@click.option("--attr", "attrs", multiple=True, metavar="NAME=VALUE", help="An attribute value (repeatable).")
@seed_option("Seed of the random inputs.")
@timeout_option(help="Wall-clock limit of one target's process, seconds.")
@json_option("Print every cell as JSON.")
@_LOAD
def ops_test(name: str, targets_spec: str | None, attrs: tuple[str, ...], seed: int, timeout: float,
             as_json: bool, modules: tuple[str, ...]) -> None:
    """Run NAME (domain::op) on the C kernel directly and on each target, over the op's
    test shapes and each declared dtype, against its NumPy reference (float64); print
    the pass/fail matrix.

    Exit status: 0 when every cell passes; 1 when a cell fails or errors; 2 on bad input;
    130 after Ctrl-C, 143 after SIGTERM.

    Examples:

        \b
        compstack ops test compstack::rms_norm
        compstack ops test compstack::bias_gelu --targets ort-cpu,tvm-llvm --attr approximate=tanh
        compstack ops test mylib::my_op --load my_ops.py
    """
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
@json_option("Print the built files as JSON.")
@_LOAD
def ops_build(cuda: bool, as_json: bool, modules: tuple[str, ...]) -> None:
    """Configure and build CMakeLists.txt (csrc/ plus registered user sources) under the
    compstack cache; print what was built. A second run with the same sources builds nothing.

    Examples:

        \b
        compstack ops build
        compstack ops build --load my_ops.py --json
    """
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
