"""cann and gcu: the op-coverage pre-check against the vendors' documented ONNX support, and
the wrappers that drive their converters.

No vendor toolchain is installed here. The tests named ``..._with_a_fake_...`` put a stand-in
``atc`` script / ``TopsInference`` module on the path: they check *our* command line, error
and artifact handling, not ATC or TopsInference themselves.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import onnx
import onnx_ir as ir
from onnx import TensorProto, helper

from compstack import targets as registry
from compstack.targets.cann.target import CannOptions, CannTarget
from compstack.targets.common.coverage import load_support_list
from conftest import run_cli, said

NO_ATC = {"PATH": os.pathsep.join(p for p in ("/usr/bin", "/bin") if os.path.isdir(p)), "COMPSTACK_TOOL_ATC": ""}


def _model(opset: int = 13) -> ir.Model:
    """Conv (fine), Conv group=2, ReduceMean on int32, Unique (not listed), Relu (fine)."""
    f, i32 = TensorProto.FLOAT, TensorProto.INT32
    w = helper.make_tensor("w", f, [4, 4, 3, 3], [0.1] * 144)
    wg = helper.make_tensor("wg", f, [4, 2, 3, 3], [0.1] * 72)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c1"], name="conv_ok", pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["c1", "wg"], ["c2"], name="conv_grouped", group=2, pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["y"], name="relu_ok"),
        helper.make_node("ReduceMean", ["k"], ["m"], name="mean_int", axes=[1], keepdims=0),
        helper.make_node("Unique", ["m"], ["u"], name="uniq"),
    ]
    graph = helper.make_graph(
        nodes, "vendor_probe",
        [helper.make_tensor_value_info("x", f, [1, 4, 8, 8]), helper.make_tensor_value_info("k", i32, [2, 3])],
        [helper.make_tensor_value_info("y", f, None), helper.make_tensor_value_info("u", i32, None)], [w, wg])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ir.serde.deserialize_model(onnx.shape_inference.infer_shapes(proto))


def _report(model: ir.Model, **options: object):
    return CannTarget(CannOptions(**options)).lower(model).report  # type: ignore[arg-type, attr-defined]


def test_cann_list_records_its_source() -> None:
    data = load_support_list("cann_onnx_ops.json").data
    assert "hiascend.com" in data["source"]["url"] and data["source"]["version"].startswith("CANN 8.0.0")
    assert len(data["ops"]) == 160 and "Gelu" not in data["ops"] and "Unique" not in data["ops"]
    for op, entry in data["ops"].items():  # every per-op rule names the page it came from
        if len(set(entry) - {"doc_name", "standard"}):
            assert entry["page"].startswith("https://") and "hiascend.com" in entry["page"], op


def test_precheck_names_the_rejected_nodes_and_why() -> None:
    report = _report(_model())
    assert report.opsets == {"ai.onnx": 13} and "kept" in report.conversion
    assert report.rejected_nodes() == ["conv_grouped", "mean_int", "uniq"]
    why = {f.node: f.reason for f in report.rejected()}
    assert why["conv_grouped"] == "attribute group=2; documented: 1"
    assert why["mean_int"].startswith("input 0 (x) is int32; documented float16, float32")
    assert why["uniq"] == "not in the documented operator list"
    assert report.rejected_ops() == ["Conv", "ReduceMean", "Unique"]
    quotes = {f.node: f.quote for f in report.rejected()}
    assert "必须设置为1" in quotes["conv_grouped"]  # the documentation's own words travel with the finding
    text = report.to_text()
    assert "conv_grouped (Conv): attribute group=2" in text and "atlasoxol_09_0040" in text


def test_precheck_warns_about_a_second_opset_import() -> None:
    # Ascend/parser's ConstructOriType: an empty-domain node needs exactly one opset import (E16005)
    model = _model()
    model.opset_imports["com.example"] = 1
    warns = [f for f in _report(model).findings if f.severity == "warn" and not f.node]
    assert len(warns) == 1 and "E16005" in warns[0].reason and "onnx_parser.cc" in warns[0].page


def test_precheck_float32_follows_the_precision_mode() -> None:
    # ATC computes in float16 by default, so float32 weights on a float16-only input pass;
    # must_keep_origin_dtype keeps float32, which the Conv page rules out for input X.
    assert "conv_ok" not in _report(_model()).rejected_nodes()
    strict = _report(_model(), precision_mode="must_keep_origin_dtype")
    assert "conv_ok" in strict.rejected_nodes()
    assert any(f.node == "conv_ok" and f.severity == "warn" and "input 1 (W)" in f.reason for f in strict.findings)


def test_precheck_converts_to_a_documented_opset() -> None:
    # ReduceMean is documented up to v16: an opset-17 model is converted to 16 ...
    auto = _report(_model(opset=17))
    assert auto.opsets == {"ai.onnx": 16} and "converted from opset 17" in auto.conversion
    # ... and kept at 17 on request, where the ReduceMean page rules the node out.
    pinned = _report(_model(opset=17), opset=17)
    assert any(f.node == "mean_int" and f.reason.startswith("opset 17 not in the documented v8-v16")
               for f in pinned.rejected())


def test_lower_zoo_cnn_writes_the_coverage_report(isolated_env: Path) -> None:
    out = isolated_env / "cann"
    proc = run_cli("lower", "zoo:cnn", "--target", "cann", "--soc", "Ascend910B", "-o", str(out), env=NO_ATC)
    assert proc.returncode == 0, proc.stderr  # the coverage report is the normal path: compare's exit rule
    assert proc.stdout.startswith("cann: unsupported (compile: no .om produced: ")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "unsupported" and manifest["artifacts"] == []
    assert manifest["flags"]["soc_version"] == "Ascend910B" and manifest["runs_here"] is False
    assert "atc not on PATH" in manifest["error"] and "atc not on PATH" in manifest["run_reason"]
    assert manifest["stages"] == ["onnx", "coverage", "coverage-json"]
    report = json.loads((out / "stages" / "02-coverage-json.json").read_text())
    assert report["opsets"] == {"ai.onnx": 16} and report["nodes"] == 21
    # the commercial 9.0.0 Gemm page: "C(可选)：偏差，该参数暂不支持"
    assert report["rejected_ops"] == ["Gemm"] and len(report["rejected_nodes"]) == 1
    assert report["rejected_nodes"][0] in (out / "stages" / "01-coverage.txt").read_text()


def test_lower_accepted_model_without_atc_is_unavailable(mlp_onnx: Path, isolated_env: Path) -> None:
    out = isolated_env / "mlp"
    proc = run_cli("lower", str(mlp_onnx), "--target", "cann", "-o", str(out), env=NO_ATC)
    assert proc.returncode == 0  # unavailable exits 0, as in compare
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "unavailable" and manifest["artifacts"] == []
    assert manifest["error"].startswith("no .om produced: atc not on PATH")
    assert "accepts all 4 nodes" in manifest["error"]


FAKE_ATC = """#!/bin/sh
# stand-in for CANN's atc: records its arguments, writes <--output>.om
printf '%s\\n' "$@" > "{log}"
for a in "$@"; do case "$a" in --output=*) out="${{a#--output=}}";; esac; done
echo "ATC run success"
printf 'fake-om' > "$out.om"
"""


def _fake_tool(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def test_atc_wrapper_with_a_fake_atc_script(mlp_onnx: Path, isolated_env: Path) -> None:
    log = isolated_env / "atc-args.txt"
    bin_dir = isolated_env / "bin"
    _fake_tool(bin_dir, "atc", FAKE_ATC.format(log=log))
    out = isolated_env / "om"
    env = {"PATH": os.pathsep.join([str(bin_dir), NO_ATC["PATH"]]), "COMPSTACK_TOOL_ATC": ""}
    proc = run_cli("lower", str(mlp_onnx), "--target", "cann", "--soc", "Ascend310P3", "-o", str(out),
                   "--option", "cann:precision_mode=allow_fp32_to_fp16", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    args = log.read_text().splitlines()
    assert args[0].startswith("--model=") and args[0].endswith("/model.onnx")
    assert args[1:] == ["--framework=5", args[2], "--soc_version=Ascend310P3", "--precision_mode=allow_fp32_to_fp16"]
    assert args[2].startswith("--output=") and args[2].endswith("/model")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["artifacts"] == ["model.om"] and (out / "model.om").read_bytes() == b"fake-om"
    assert manifest["run_command"].startswith("python3 -m ais_bench --model model.om")
    assert manifest["runs_here"] is False and "does not run .om" in manifest["run_reason"]
    atc_stage = (out / "stages" / "03-atc.txt").read_text()
    assert atc_stage.startswith("$ ") and "--framework=5" in atc_stage and "ATC run success" in atc_stage


def test_atc_wrapper_reports_a_failing_fake_atc(mlp_onnx: Path, isolated_env: Path) -> None:
    atc = _fake_tool(isolated_env / "bin", "atc", "#!/bin/sh\necho 'E16002: optype [ai.onnx::17::Foo] not supported' >&2\n"
                     "exit 3\n")
    out = isolated_env / "bad"
    proc = run_cli("lower", str(mlp_onnx), "--target", "cann", "--soc", "Ascend910B", "-o", str(out),
                   env={"COMPSTACK_TOOL_ATC": str(atc), "COMPSTACK_SAVE_TEMPS": str(isolated_env / "temps")})
    assert proc.returncode == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["stage"] == "compile"
    assert manifest["error"].startswith("atc exited with status 3: E16002") and "temps kept in" in manifest["error"]
    assert "--soc_version=Ascend910B" in (isolated_env / "temps" / "commands.txt").read_text()


def test_bad_soc_is_a_one_line_error(isolated_env: Path) -> None:
    proc = run_cli("lower", "zoo:cnn", "--target", "cann", "--soc", "910B", "-o", str(isolated_env / "x"))
    assert proc.returncode == 2 and len(said(proc.stderr)) == 1
    assert proc.stderr.startswith("compstack: error: --soc 910B: expected Ascend<Name> as `npu-smi info`")
    proc = run_cli("lower", "zoo:cnn", "--target", "gcu", "--soc", "Ascend910B", "-o", str(isolated_env / "x"))
    assert proc.returncode == 2 and "--soc: target 'gcu' has no SoC option" in proc.stderr


def test_targets_lists_cann_and_gcu(isolated_env: Path) -> None:
    rows = {r["name"]: r for r in json.loads(run_cli("targets", "--json", env=NO_ATC).stdout)}
    assert rows["cann"]["device"] == "ascend" and rows["cann"]["available"] and not rows["cann"]["runs"]
    assert rows["cann"]["reason"].startswith("atc not on PATH; install the CANN toolkit")
    assert rows["gcu"]["device"] == "gcu" and rows["gcu"]["available"] and not rows["gcu"]["runs"]
    assert "TopsInference not installed" in rows["gcu"]["reason"]
    assert {"cann", "gcu"}.isdisjoint(registry.resolve("all"))  # not in compare's default set


def test_gcu_says_it_cannot_precheck(mlp_onnx: Path, isolated_env: Path) -> None:
    out = isolated_env / "gcu"
    proc = run_cli("lower", str(mlp_onnx), "--target", "gcu", "-o", str(out))
    assert proc.returncode == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "unavailable" and manifest["artifacts"] == []
    assert manifest["error"] == ("no .exec produced: TopsInference not installed (Enflame TopsRider SDK; it needs "
                                 "Enflame's own installer); no public operator list for Enflame GCU; cannot pre-check")
    assert "no public operator list for Enflame GCU; cannot pre-check" in (out / "stages" / "01-coverage.txt").read_text()
    assert json.loads((out / "stages" / "02-coverage-json.json").read_text())["checked"] is False


FAKE_TOPS = '''"""Stand-in for Enflame's TopsInference: records the calls, writes them as the executable."""
import contextlib, json
ONNX_MODEL, KDEFAULT, KFP16, KFP16_MIX = "onnx", "default", "fp16", "mix"
calls = {}
@contextlib.contextmanager
def device(card, cluster):
    calls["device"] = [card, cluster]
    yield
class _Parser:
    def set_input_names(self, names): calls["names"] = names
    def set_input_shapes(self, shapes): calls["shapes"] = shapes
    def read(self, path): calls["read"] = path; return "network"
class _Engine:
    def save_executable(self, path):
        open(path, "w").write(json.dumps(calls))
class _Optimizer:
    def set_build_flag(self, flag): calls["flag"] = flag
    def build(self, network): return _Engine()
def create_parser(kind): calls["parser"] = kind; return _Parser()
def create_optimizer(): return _Optimizer()
'''


def test_gcu_wrapper_with_a_fake_topsinference_module(mlp_onnx: Path, isolated_env: Path) -> None:
    fake = isolated_env / "fake_sdk"
    fake.mkdir()
    (fake / "TopsInference.py").write_text(FAKE_TOPS)
    out = isolated_env / "gcu"
    env = {"PYTHONPATH": os.pathsep.join([str(fake), os.environ["PYTHONPATH"]])}
    proc = run_cli("lower", str(mlp_onnx), "--target", "gcu", "-o", str(out), "--option", "gcu:precision=fp16", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = json.loads((out / "model.exec").read_text())
    assert calls["parser"] == "onnx" and calls["names"] == "x" and calls["shapes"] == "4,16"
    assert calls["flag"] == "fp16" and calls["device"] == [0, 0] and calls["read"].endswith("model.onnx")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["artifacts"] == ["model.exec"] and "load_tops_executable" in manifest["run_command"]
    assert sys.executable in (out / "stages" / "03-build.txt").read_text()
