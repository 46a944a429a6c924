"""Stack-release envs: provisioning time cold and from the store, and a bisect over a range.

    python benchmarks/versions.py --target ort-cpu --version 1.19.2
    python benchmarks/versions.py --target ort-cpu --version 1.19.2 --bisect 1.15.0..1.32.0
    python benchmarks/versions.py --target iree-llvm-cpu --version 3.6.0 --bisect 3.0.0..3.13.0

Times (seconds, printed):

* ``cold``: the env of ``TARGET@VERSION`` built into a fresh store (``--store``, default a
  temporary folder): uv venv + install + the version check + the manifest. uv's own wheel
  cache is kept (``uv cache``), as on any machine that built an env before; the first
  build on a machine also downloads the wheels.
* ``cached``: the same env asked for again in a new process (manifest verified: every
  file's size and SHA-256) and once more in the same process (memoised).
* ``bisect``: ``compstack bisect-versions`` of an opset-20 ``Gelu`` model over
  ``--bisect RANGE`` in that store (envs built on the way count in it), with its answer,
  evaluations and envs built.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_ENSURE = """
import sys, time
from compstack.core.envs import ensure_env
from compstack.core.store import Store
from compstack.targets.releases import recipe
store, target, version = Store(sys.argv[1]), sys.argv[2], sys.argv[3]
t0 = time.perf_counter(); info = ensure_env(store, recipe(target, version), version); t1 = time.perf_counter()
ensure_env(store, recipe(target, version), version); t2 = time.perf_counter()
print(f"{t1 - t0:.3f} {t2 - t1:.6f} {info.bytes} {info.built_s:.3f} {info.tool}")
"""


def _ensure(store: Path, target: str, version: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _ENSURE, str(store), target, version], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr.strip().splitlines()[-1])
    return out.stdout.split()


def _gelu(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    g = helper.make_graph([helper.make_node("Gelu", ["x"], ["y"])], "gelu", [x], [y])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), str(path))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="ort-cpu")
    ap.add_argument("--version", default="1.19.2")
    ap.add_argument("--store", help="Store root (default: a fresh temporary folder, removed after).")
    ap.add_argument("--bisect", metavar="RANGE", help="Also time bisect-versions over RANGE (FIRST..LAST).")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cs-bench-versions-") as tmp:
        store = Path(args.store or tmp)
        cold = _ensure(store, args.target, args.version)
        print(f"cold:   {args.target}@{args.version} built in {float(cold[0]):.2f} s "
              f"({int(cold[2]) / 1e6:.0f} MB, {cold[4]})")
        warm = _ensure(store, args.target, args.version)
        print(f"cached: {float(warm[0]):.2f} s in a new process (manifest verified), "
              f"{float(warm[1]) * 1e3:.3f} ms again in the same process")
        if args.bisect:
            model = _gelu(Path(tmp) / "gelu.onnx")
            t0 = time.perf_counter()
            res = subprocess.run([sys.executable, "-m", "compstack.cli", "bisect-versions", str(model), "--target",
                                  args.target, "--range", args.bisect, "--json"], capture_output=True, text=True,
                                 env={**__import__("os").environ, "COMPSTACK_CACHE_DIR": str(store)})
            dt = time.perf_counter() - t0
            if res.returncode not in (0, 1):
                raise SystemExit(res.stderr.strip().splitlines()[-1] if res.stderr.strip() else "bisect failed")
            doc = json.loads(res.stdout)
            print(f"bisect: {dt:.1f} s over {len(doc['releases'])} releases: {doc['summary']}")


if __name__ == "__main__":
    main()
