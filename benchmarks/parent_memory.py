"""Peak resident memory of the compstack CLI process itself (not its workers) on a
generated model with external data.

    python benchmarks/parent_memory.py [--mb 300] [--folder /tmp/cs-mem] [-- CLI ARGS...]

Writes ``model.onnx`` + ``model.onnx.data`` (float32 MatMul chain, about ``--mb`` MiB of
weights) into the folder once, then runs ``compstack compare MODEL --targets ort-cpu
--no-latency`` (or the CLI arguments after ``--``, where ``{model}`` is the model path)
in a child process and prints that process's peak RSS (``ru_maxrss`` of the process
itself, read at exit) next to the model size.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

_PROBE = """
import atexit, resource, sys
atexit.register(lambda: print("PEAK_RSS_MIB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                              file=sys.stderr))
from compstack.cli import main
main(sys.argv[1:])
"""


def make_model(folder: Path, mb: int) -> Path:
    """A MatMul chain of 2048x2048 float32 weights (16 MiB each) totalling about ``mb`` MiB."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    path = folder / "model.onnx"
    if path.exists():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    n = max(1, mb // 16)
    rng = np.random.default_rng(0)
    inits, nodes, prev = [], [], "x"
    for i in range(n):
        w = (rng.standard_normal((2048, 2048), dtype=np.float32) / 45).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        out = "y" if i == n - 1 else f"h{i}"
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [out], name=f"mm{i}"))
        prev = out
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2048])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2048])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    onnx.save(m, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="model.onnx.data")
    return path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--folder", default="/tmp/cs-mem")
    args, rest = ap.parse_known_args()
    rest = [a for a in rest if a != "--"]
    model = make_model(Path(args.folder), args.mb)
    data = model.with_name("model.onnx.data").stat().st_size
    argv = [a.replace("{model}", str(model)) for a in rest] or [
        "compare", str(model), "--targets", "ort-cpu", "--no-latency", "--cache-dir", str(Path(args.folder) / "cache"),
        "--db", str(Path(args.folder) / "r.sqlite")]
    proc = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True)
    peak = next((ln.split()[1] for ln in proc.stderr.splitlines() if ln.startswith("PEAK_RSS_MIB")), "?")
    print(f"model {data / 2**20:.0f} MiB external data; CLI exit {proc.returncode}; "
          f"CLI process peak RSS {peak} MiB ({' '.join(argv[:2])})")
    if proc.returncode not in (0, 1):
        print(proc.stderr[-2000:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
