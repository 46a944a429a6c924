"""The compstack process holds about one copy of a model: external data stays on disk
(memory-mapped), the fingerprint and the cached model file are made one tensor at a
time, and ``--memory-limit`` applies to the process itself (see tests/test_bad_input.py
for the one-line error)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
from onnx import TensorProto, helper, numpy_helper

from compstack.core import ir as cir
from compstack.core.memlimit import own_rss_mb

MIB = 2**20


def _chain(folder: Path, n: int = 4, external: bool = True) -> Path:
    """``n`` MatMuls with 1024x1024 float32 weights (4 MiB each)."""
    rng = np.random.default_rng(0)
    inits, nodes, prev = [], [], "x"
    for i in range(n):
        inits.append(numpy_helper.from_array((rng.standard_normal((1024, 1024)) / 32).astype(np.float32), f"w{i}"))
        out = "y" if i == n - 1 else f"h{i}"
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [out], name=f"mm{i}"))
        prev = out
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1024])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "m.onnx"
    onnx.save(m, str(path), save_as_external_data=external, all_tensors_to_one_file=True, location="m.onnx.data")
    return path


def test_load_keeps_external_data_on_disk_and_fingerprint_matches_inline(tmp_path: Path) -> None:
    path = _chain(tmp_path / "ext", n=16)  # 64 MiB of weights
    before = own_rss_mb()
    model = cir.load(path)
    grown = own_rss_mb() - before
    assert all(isinstance(v.const_value, ir.ExternalTensor) for v in model.graph.initializers.values())
    assert grown < 16, f"loading 64 MiB of external weights took {grown:.0f} MiB of anonymous memory"
    fp = cir.fingerprint(model)
    assert own_rss_mb() - before < 16  # hashed through the memory map, one tensor at a time
    inline = cir.load(_chain(tmp_path / "inline", n=16, external=False))
    assert cir.fingerprint(inline) == fp
    changed = onnx.load(str(path))
    changed.graph.initializer[3].raw_data = np.zeros((1024, 1024), np.float32).tobytes()
    onnx.save(changed, str(tmp_path / "changed.onnx"))
    assert cir.fingerprint(cir.load(tmp_path / "changed.onnx")) != fp


def test_saved_model_streams_external_data_and_reloads(tmp_path: Path) -> None:
    model = cir.load(_chain(tmp_path / "ext"))
    out = cir.save(model, tmp_path / "cache" / "fp.tmp1.onnx", data_name="fp.onnx.data")
    assert (tmp_path / "cache" / "fp.onnx.data").stat().st_size == 4 * 4 * MIB
    assert out.stat().st_size < 64 * 1024  # the graph only
    again = ir.load(str(out))
    for name, v in model.graph.initializers.items():
        assert np.array_equal(again.graph.initializers[name].const_value.numpy(), v.const_value.numpy())


def test_compare_of_an_external_data_model_runs(tmp_path: Path, isolated_env: Path) -> None:
    path = _chain(tmp_path / "ext")
    proc = subprocess.run([sys.executable, "-m", "compstack.cli", "compare", str(path), "--targets", "ort-cpu",
                           "--no-latency", "--json", "--memory-limit", "2000"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = json.loads(proc.stdout)["results"][0]
    assert row["status"] == "ok" and row["outputs"][0]["max_abs_err"] < 1e-4
    datas = list((isolated_env / "cache" / "models").glob("*/model.onnx.data"))  # store entries: <key>/model.onnx
    assert datas and all(d.stat().st_size == 4 * 4 * MIB for d in datas)


_PEAK = """
import resource, sys
from compstack.core import ir as cir
from compstack.run.session import model_file
from pathlib import Path
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
model = cir.load(sys.argv[1])
fp = cir.fingerprint(model)
model_file(cir.SourceModel(name="m", model=model), Path(sys.argv[2]))
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024)
"""


def test_inline_model_costs_about_two_copies_at_peak(tmp_path: Path) -> None:
    path = _chain(tmp_path / "inline", n=16, external=False)  # 64 MiB inline
    done = subprocess.run([sys.executable, "-c", _PEAK, str(path), str(tmp_path / "cache")], capture_output=True,
                          text=True, check=True)
    grown = int(done.stdout.strip())
    # parse (one copy) + one tensor at a time; the checker and shape inference see a
    # skeleton without the weights (before: about five copies)
    assert grown < 2.5 * 64, f"peak grew by {grown} MiB for 64 MiB of inline weights"
    again = cir.load(tmp_path / "inline" / "m.onnx")
    assert [v.name for v in again.graph.inputs] == ["x"] and len(again.graph.initializers) == 16
