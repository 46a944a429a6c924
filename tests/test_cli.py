"""The CLI end to end: JSON schema, artifact cache, and one test per kind of bad input."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from conftest import PROGRESS, make_mlp, run_cli

FAST = ["--min-runs", "3", "--min-time", "0", "--warmup", "1"]


def _compare_json(*args: str) -> dict:
    proc = run_cli("compare", *args, "--json", *FAST)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # stdout holds only the JSON


def test_compare_json_schema_and_values(mlp_onnx: Path, isolated_env: Path) -> None:
    data = _compare_json(str(mlp_onnx), "--targets", "ort-cpu,reference")
    assert data["schema_version"] == 1
    assert data["model"]["name"] == "mlp.onnx" and data["model"]["nodes"] == 4
    assert len(data["model"]["fingerprint"]) == 16
    assert data["reference"] == {"target": "reference", "precision": "float64"}
    rows = {r["target"]: r for r in data["results"]}
    ort = rows["ort-cpu"]
    assert ort["status"] == "ok" and ort["stage"] == "" and ort["error"] == ""
    assert set(ort["latency_ms"]) >= {"median", "p10", "p90", "cv"}
    assert ort["latency_ms"]["p10"] <= ort["latency_ms"]["median"] <= ort["latency_ms"]["p90"]
    out = ort["outputs"][0]
    assert out["name"] == "y" and out["ok"] is True
    assert 0 < out["max_abs_err"] < 1e-5 and out["rel_l2"] < 1e-6
    assert ort["compile_s"] > 0
    assert ort["flags"]["providers"] == ["CPUExecutionProvider"]
    db = sqlite3.connect(isolated_env / "results.sqlite")
    assert db.execute("SELECT COUNT(*) FROM results WHERE status='ok'").fetchone()[0] == 2


def test_second_compare_compiles_nothing_and_corrupt_entry_is_rebuilt(mlp_onnx: Path, isolated_env: Path) -> None:
    first = _compare_json(str(mlp_onnx), "--targets", "ort-cpu,reference", "--no-latency")
    assert not any(r["cached"] for r in first["results"])
    second = _compare_json(str(mlp_onnx), "--targets", "ort-cpu,reference", "--no-latency")
    assert all(r["cached"] and r["status"] == "ok" for r in second["results"])
    first_s = {r["target"]: r["compile_s"] for r in first["results"]}
    assert {r["target"]: r["compile_s"] for r in second["results"]} == first_s  # lower + compile, as the first
    # Truncate the ort-cpu artifact: the entry must be detected, dropped and rebuilt.
    (artifact,) = (isolated_env / "cache" / "artifacts" / "ort-cpu").glob("*/optimized.onnx")
    artifact.write_bytes(artifact.read_bytes()[:100])
    third = _compare_json(str(mlp_onnx), "--targets", "ort-cpu", "--no-latency")
    row = third["results"][0]
    assert row["status"] == "ok" and row["cached"] is False
    assert any("corrupt cache entry" in n and "truncated" in n for n in row["notes"])
    fourth = _compare_json(str(mlp_onnx), "--targets", "ort-cpu", "--no-latency", "--no-cache")
    assert fourth["results"][0]["cached"] is False


def test_inputs_roundtrip_save_and_replay(mlp_onnx: Path, isolated_env: Path) -> None:
    ins, outs = isolated_env / "in.npz", isolated_env / "out.npz"
    _compare_json(str(mlp_onnx), "--targets", "ort-cpu", "--seed", "7", "--save-inputs", str(ins),
                  "--save-outputs", str(outs), "--no-latency")
    saved = dict(np.load(ins))
    assert list(saved) == ["x"] and saved["x"].shape == (4, 16) and saved["x"].dtype == np.float32
    first = dict(np.load(outs))
    assert set(first) == {"reference::y", "ort-cpu::y"} and first["reference::y"].dtype == np.float64
    outs2 = isolated_env / "out2.npz"
    data = _compare_json(str(mlp_onnx), "--targets", "ort-cpu", "--inputs", str(ins), "--save-outputs", str(outs2),
                         "--no-latency")
    assert data["inputs"]["source"] == "file"
    assert np.array_equal(np.load(outs2)["ort-cpu::y"], first["ort-cpu::y"])


def test_run_prints_outputs_and_latency(mlp_onnx: Path, isolated_env: Path) -> None:
    proc = run_cli("run", str(mlp_onnx), "--target", "ort-cpu", *FAST)
    assert proc.returncode == 0, proc.stderr
    assert "ort-cpu::y" in proc.stdout and "median" in proc.stdout and "float32" in proc.stdout


def test_lower_writes_artifact_stages_manifest(mlp_onnx: Path, isolated_env: Path) -> None:
    out = isolated_env / "out"
    proc = run_cli("lower", str(mlp_onnx), "--target", "ort-cpu", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "ok" and manifest["target"] == "ort-cpu"
    assert manifest["inputs"] == [{"name": "x", "dtype": "float32", "shape": [4, 16]}]
    assert manifest["artifacts"] == ["optimized.onnx"] and (out / "optimized.onnx").stat().st_size > 100
    assert manifest["stages"] == ["onnx", "optimized"]
    assert "FusedGemm" in (out / "stages" / "01-optimized.txt").read_text() or \
        "MatMul" in (out / "stages" / "01-optimized.txt").read_text()


def test_targets_lists_availability_and_versions(isolated_env: Path) -> None:
    proc = run_cli("targets", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "os.fork()" not in proc.stderr  # OpenVINO's telemetry no longer forks after JAX is imported
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert {"reference", "ort-cpu", "tvm-llvm", "iree-llvm-cpu"} <= set(rows)
    assert rows["ort-cpu"]["available"] and "onnxruntime" in rows["ort-cpu"]["versions"]
    assert "cpu" in rows["ort-cpu"]["aliases"]


def test_import_compstack_and_help_load_no_stack() -> None:
    import subprocess
    import sys

    code = ("import sys, compstack, compstack.cli\n"
            "from click.testing import CliRunner\n"
            "r = CliRunner().invoke(compstack.cli.cli, ['--help']); assert r.exit_code == 0\n"
            "heavy = {'torch', 'jax', 'tvm', 'iree', 'onnxruntime', 'tensorrt', 'transformers', 'openvino'}\n"
            "print(sorted(heavy & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ---- bad input: one line, non-zero exit, no traceback -----------------------------------

def _bad(*args: str, match: str, cwd: Path | None = None) -> None:
    proc = run_cli(*args, cwd=cwd)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not PROGRESS.match(ln)]
    assert len(lines) == 1, proc.stderr
    assert match in lines[0], lines[0]


def test_bad_missing_file(isolated_env: Path) -> None:
    _bad("compare", str(isolated_env / "missing.onnx"), match="missing.onnx: no such file")


def test_bad_not_onnx(isolated_env: Path) -> None:
    p = isolated_env / "notes.onnx"
    p.write_text("just text\n")
    _bad("compare", str(p), match="notes.onnx: ")


def test_bad_truncated(isolated_env: Path) -> None:
    full = make_mlp(isolated_env / "m.onnx").read_bytes()
    p = isolated_env / "cut.onnx"
    p.write_bytes(full[: len(full) * 2 // 3])
    _bad("compare", str(p), match="cut.onnx: ")


def test_bad_checker(isolated_env: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Relu", ["y"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), isolated_env / "ssa.onnx")
    _bad("compare", str(isolated_env / "ssa.onnx"), match="ssa.onnx: ONNX checker")


def test_bad_unknown_domain(isolated_env: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("Frob", ["x"], ["y"], domain="acme", name="frob")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("acme", 1)])
    onnx.save(m, isolated_env / "acme.onnx")
    _bad("compare", str(isolated_env / "acme.onnx"), match="unknown op domain 'acme'")


def test_bad_unknown_target(mlp_onnx: Path, isolated_env: Path) -> None:
    _bad("compare", str(mlp_onnx), "--targets", "ort-cpu,tvm-lvm", match="unknown target 'tvm-lvm'; did you mean tvm-llvm")


def test_bad_unknown_zoo_name(isolated_env: Path) -> None:
    _bad("compare", "zoo:resnet9000", match="resnet9000")


def test_bad_pyfile_missing_function(isolated_env: Path) -> None:
    f = isolated_env / "mine.py"
    f.write_text("def build():\n    return 42\n")
    _bad("compare", f"{f}:nothere", match="nothere")
    _bad("compare", f"{f}:build", match="build")


def test_bad_output_folder_not_writable(mlp_onnx: Path, isolated_env: Path) -> None:
    blocker = isolated_env / "afile"
    blocker.write_text("")
    _bad("lower", str(mlp_onnx), "--target", "ort-cpu", "-o", str(blocker / "out"), match="not writable")


def test_bad_inputs_file_wrong_name(mlp_onnx: Path, isolated_env: Path) -> None:
    np.savez(isolated_env / "in.npz", z=np.zeros((4, 16), np.float32))
    _bad("compare", str(mlp_onnx), "--inputs", str(isolated_env / "in.npz"), match="no array for input 'x'")


def test_bad_inputs_file_wrong_shape(mlp_onnx: Path, isolated_env: Path) -> None:
    np.savez(isolated_env / "in.npz", x=np.zeros((4, 15), np.float32))
    _bad("compare", str(mlp_onnx), "--inputs", str(isolated_env / "in.npz"), match="shape [4, 15]")


def test_bad_val_range_and_option(mlp_onnx: Path, isolated_env: Path) -> None:
    _bad("compare", str(mlp_onnx), "--val-range", "x:3", match="--val-range x:3")
    _bad("compare", str(mlp_onnx), "--option", "ort-cpu:bogus=1", match="--option ort-cpu:bogus: unknown option")


def test_bad_cache_dir_is_a_file(mlp_onnx: Path, isolated_env: Path) -> None:
    blocker = isolated_env / "afile"
    blocker.write_text("")
    proc = run_cli("compare", str(mlp_onnx), "--targets", "ort-cpu", env={"COMPSTACK_CACHE_DIR": str(blocker)})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"cache folder {blocker}: not writable" in proc.stderr


def test_bad_inputs_npy_not_npz(mlp_onnx: Path, isolated_env: Path) -> None:
    np.save(isolated_env / "x.npy", np.zeros((4, 16), np.float32))
    _bad("compare", str(mlp_onnx), "--inputs", str(isolated_env / "x.npy"), match="single .npy array")


def test_bad_extra_array_in_inputs(mlp_onnx: Path, isolated_env: Path) -> None:
    np.savez(isolated_env / "in.npz", x=np.zeros((4, 16), np.float32), z=np.zeros(3))
    _bad("compare", str(mlp_onnx), "--inputs", str(isolated_env / "in.npz"), match="z match no model input")


@pytest.mark.parametrize("flag, value", [("--min-time", "nan"), ("--timeout", "inf"), ("--rtol", "-1")])
def test_bad_numbers(mlp_onnx: Path, isolated_env: Path, flag: str, value: str) -> None:
    _bad("compare", str(mlp_onnx), flag, value, match=f"'{flag}'")


def test_bad_option_value(mlp_onnx: Path, isolated_env: Path) -> None:
    _bad("compare", str(mlp_onnx), "--option", "ort-cpu:opt_level=bogus", match="--option ort-cpu:opt_level=bogus")
    _bad("compare", str(mlp_onnx), "--option", "tvm-llvm:opt_level=9", match="expected 0..3")


def test_huge_input_shape_is_a_clear_error(isolated_env: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), isolated_env / "dyn.onnx")
    _bad("compare", str(isolated_env / "dyn.onnx"), match="--input-shape x:<n>x4")
    _bad("compare", str(isolated_env / "dyn.onnx"), "--input-shape", "x:100000000000x4", match="memory")


def test_model_without_inputs_runs(isolated_env: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    node = helper.make_node("Constant", [], ["y"], value=numpy_helper.from_array(np.arange(6, dtype=np.float32)))
    g = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), isolated_env / "const.onnx")
    data = _compare_json(str(isolated_env / "const.onnx"), "--targets", "ort-cpu,iree-llvm-cpu", "--no-latency")
    assert [r["status"] for r in data["results"]] == ["ok", "ok"]


def test_compare_exits_1_on_mismatch(mlp_onnx: Path, isolated_env: Path) -> None:
    # rtol=atol=0 against the float64 oracle: float32 rounding is a real mismatch.
    proc = run_cli("compare", str(mlp_onnx), "--targets", "ort-cpu", "--rtol", "0", "--atol", "0", "--no-latency",
                   "--json")
    assert proc.returncode == 1
    row = json.loads(proc.stdout)["results"][0]
    assert row["status"] == "mismatch" and row["stage"] == "compare" and "outside tolerance" in row["error"]


def test_lower_into_used_folder_replaces_previous_output(mlp_onnx: Path, isolated_env: Path) -> None:
    out = isolated_env / "out"
    assert run_cli("lower", str(mlp_onnx), "--target", "iree-llvm-cpu", "-o", str(out)).returncode == 0
    assert (out / "model.vmfb").exists()
    assert run_cli("lower", str(mlp_onnx), "--target", "ort-cpu", "-o", str(out)).returncode == 0
    assert not (out / "model.vmfb").exists() and (out / "optimized.onnx").exists()
    assert sorted(p.name for p in (out / "stages").iterdir()) == ["00-onnx.txt", "01-optimized.txt"]


def test_usage_errors_are_one_line(isolated_env: Path) -> None:
    _bad("lower", "zoo:mlp", "--target", "ort-cpu", match="Missing option '-o'")
