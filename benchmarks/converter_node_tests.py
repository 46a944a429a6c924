"""Pass rate of compstack's ONNX converters (JAX, FX) on the official ONNX node tests.

    python benchmarks/converter_node_tests.py --framework jax
    python benchmarks/converter_node_tests.py --framework fx --pattern 'resize|pad' --failures

Each node-test case (generated from the ``onnx`` wheel's case definitions, see
:mod:`compstack.conformance.cases`) is canonicalised at its own opset (shape inference,
no version upgrade), translated with :func:`compstack.translate.jax.to_jax` (then
``jax.jit``) or :func:`compstack.translate.fx.to_fx` (the GraphModule run eagerly:
this measures the converters, not Inductor), run on the case's inputs and compared with
the ONNX runner's rule (:func:`compstack.conformance.worker.compare_case`).

For the choice between our converters and existing libraries, ``--framework onnx2torch``
and ``--framework jaxonnxruntime`` run the same cases through those libraries, as
published (not part of compstack's dependencies: install them in a separate environment,
``pip install --no-deps onnx2torch jaxonnxruntime``; onnx2torch needs a ``torchvision``
import, stubbed here since only its NMS/RoiAlign converters use it).

Statuses: ``passed``; ``failed`` (wrong values, or the converter raised);
``unsupported`` (an op without a converter, or a mode the converter declines);
``skipped`` (sequence/optional inputs, or dtypes the framework lacks: strings, float8,
int4...). Prints the counts and the pass rate over all cases and over the cases whose
ops all have converters.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

SKIP_DTYPES = {"object", "bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
               "float8_e8m0fnu", "int4", "uint4", "float4_e2m1", "int2", "uint2", "complex64", "complex128"}


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _Timeout()


def _static_operands(proto: object, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Turn small integer graph inputs after the first (axes, pads, shapes, k...) into
    initializers, as they are in exported models; returns the remaining run-time inputs.
    Input 0 always stays a run-time input, so nothing is folded away entirely."""
    from onnx import numpy_helper

    keep, drop = [], []
    for k, (vi, arr) in enumerate(zip(list(proto.graph.input), inputs)):
        if k > 0 and arr.dtype.kind in "iu" and arr.size <= 64:
            proto.graph.initializer.append(numpy_helper.from_array(arr, vi.name))
            drop.append(vi.name)
        else:
            keep.append(arr)
    remaining = [vi for vi in proto.graph.input if vi.name not in drop]
    del proto.graph.input[:]
    proto.graph.input.extend(remaining)
    return keep


def run_case(case: object, framework: str, static_operands: bool = False) -> tuple[str, str]:
    """``(status, detail)`` for one case."""
    import onnx

    from compstack.conformance.worker import compare_case
    from compstack.core import ir as cir
    from compstack.core.errors import UnsupportedError, UserError

    if case.io_kind != "tensor":
        return "skipped", case.io_kind
    for arr in [*case.inputs, *case.outputs]:
        name = "object" if arr.dtype == object else arr.dtype.name
        if name in SKIP_DTYPES:
            return "skipped", f"dtype {name}"
    proto = onnx.ModelProto()
    proto.ParseFromString(case.model)
    if static_operands:
        import copy

        case = copy.copy(case)
        case.inputs = _static_operands(proto, list(case.inputs))
    opset = max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=1)
    try:
        model = cir.canonicalize(proto, source=case.name, opset=opset)
    except UserError as exc:
        return "skipped", f"canonicalize: {exc}"
    names = [v.name for v in model.graph.inputs if not v.is_initializer()]
    if len(names) != len(case.inputs):
        return "skipped", "inputs do not match the graph's"
    if framework in LIBRARIES:
        return _run_library(case, proto, framework, compare_case)
    try:
        if framework == "jax":
            import jax

            from compstack.translate.jax import to_jax

            prog = to_jax(model)
            outs = jax.jit(prog.fn)(prog.params, *case.inputs)
            got = [np.asarray(o) for o in outs]
        else:
            import torch

            from compstack.translate.fx import to_fx

            gm = to_fx(model)
            with torch.no_grad():
                outs = gm(*[torch.from_numpy(np.array(a)) for a in case.inputs])
            got = [o.numpy() if isinstance(o, torch.Tensor) else np.asarray(o) for o in outs]
    except UnsupportedError as exc:
        return "unsupported", str(exc)
    except _Timeout:
        return "failed", "timeout"
    except Exception as exc:  # noqa: BLE001 - a converter bug is this case's result
        line = (str(exc).strip().splitlines() or [""])[0]
        return "failed", f"{type(exc).__name__}: {line[:300]}"
    why = compare_case(case.outputs, got, case.rtol, case.atol)
    return ("failed", why) if why else ("passed", "")


LIBRARIES = ("onnx2torch", "jaxonnxruntime")


def _stub_torchvision() -> None:
    import types

    if "torchvision" in sys.modules:
        return
    tv, ops = types.ModuleType("torchvision"), types.ModuleType("torchvision.ops")

    def missing(*args: object, **kwargs: object) -> None:
        raise NotImplementedError("torchvision stub")

    ops.nms = ops.box_convert = ops.roi_align = missing
    tv.ops = ops
    sys.modules["torchvision"], sys.modules["torchvision.ops"] = tv, ops


def _run_library(case: object, proto: object, framework: str, compare_case: object) -> tuple[str, str]:
    """One case through onnx2torch (eager GraphModule) or jaxonnxruntime (jitted)."""
    try:
        if framework == "onnx2torch":
            import torch

            _stub_torchvision()
            from onnx2torch import convert

            gm = convert(proto).eval()
            with torch.no_grad():
                outs = gm(*[torch.from_numpy(np.array(a)) for a in case.inputs])
            outs = outs if isinstance(outs, (tuple, list)) else [outs]
            got = [o.numpy() if isinstance(o, torch.Tensor) else np.asarray(o) for o in outs]
        else:
            import jax
            from jaxonnxruntime import call_onnx, config

            config.update("jaxort_only_allow_initializers_as_static_args", False)
            fn, params = call_onnx.call_onnx_model(proto, list(case.inputs))
            outs = jax.jit(lambda p, xs: fn(p, xs))(params, list(case.inputs))
            got = [np.asarray(o) for o in outs]
    except NotImplementedError as exc:
        return "unsupported", str(exc).splitlines()[0][:200] if str(exc) else "NotImplementedError"
    except _Timeout:
        return "failed", "timeout"
    except Exception as exc:  # noqa: BLE001 - the library's failure is this case's result
        text = str(exc)
        if "not implemented" in text.lower() or "Converter is not implemented" in text:
            return "unsupported", text.splitlines()[0][:200]
        line = (text.strip().splitlines() or [""])[0]
        return "failed", f"{type(exc).__name__}: {line[:300]}"
    why = compare_case(case.outputs, got, case.rtol, case.atol)
    return ("failed", why) if why else ("passed", "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=("jax", "fx", *LIBRARIES), required=True)
    parser.add_argument("--pattern", help="regex on case names")
    parser.add_argument("--failures", action="store_true", help="print each failed case and why")
    parser.add_argument("--unsupported", action="store_true", help="print the unsupported ops, most frequent first")
    parser.add_argument("--json", type=Path, help="write per-case results here")
    parser.add_argument("--case-timeout", type=int, default=60, help="seconds per case")
    parser.add_argument("--static-operands", action="store_true",
                        help="small integer inputs after the first (axes, pads, shapes) become initializers, "
                             "as in exported models")
    args = parser.parse_args(argv)

    from compstack.conformance.cases import load_cases, select
    from compstack.frontends.zoo import default_cache_dir

    if args.framework in ("jax", "jaxonnxruntime"):
        from compstack.translate.jax import enable_x64

        enable_x64()
    cases = select(load_cases(default_cache_dir()), args.pattern)
    signal.signal(signal.SIGALRM, _alarm)
    rows = []
    t0 = time.perf_counter()
    for case in cases:
        signal.alarm(args.case_timeout)
        try:
            status, detail = run_case(case, args.framework, args.static_operands)
        except _Timeout:
            status, detail = "failed", "timeout"
        finally:
            signal.alarm(0)
        rows.append({"case": case.name, "status": status, "detail": detail})
    wall = time.perf_counter() - t0
    counts = Counter(r["status"] for r in rows)
    run = counts["passed"] + counts["failed"]
    total = run + counts["unsupported"]
    if args.failures:
        for r in rows:
            if r["status"] == "failed":
                print(f"FAIL {r['case']}: {r['detail']}")
    if args.unsupported:
        ops = Counter()
        for r in rows:
            if r["status"] == "unsupported":
                ops[r["detail"].split(": ", 1)[-1][:80]] += 1
        for op, n in ops.most_common():
            print(f"{n:4d}  {op}")
    print(f"framework {args.framework}: {len(cases)} cases in {wall:.0f} s: " +
          ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if total:
        print(f"pass rate: {counts['passed']}/{total} = {100 * counts['passed'] / total:.1f}% of tensor cases "
              f"(not counting {counts['skipped']} skipped)")
    if run:
        print(f"pass rate where every op has a converter: {counts['passed']}/{run} = "
              f"{100 * counts['passed'] / run:.1f}%")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
