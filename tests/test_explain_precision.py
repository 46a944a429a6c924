"""explain and a precision the user chose (issue #28 part 6): ``--option
openvino-cpu:precision=bf16`` is the cause, not "an op bug"; a zero float32 noise floor
never prints as ``infx ... floor 0``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli


def test_zero_noise_floor_is_not_printed_as_infinite_times() -> None:
    from compstack.analysis.verdict import judge

    ref = np.array([1.0, 2.0, 3.0])  # float32 computes these exactly: floor 0
    v = judge(np.array([1.0, 2.5, 3.0], dtype=np.float32), ref, ref.astype(np.float32))
    assert v.kind == "wrong" and v.floor == 0
    assert "inf" not in v.detail and "noise floor of 0" in v.detail


def test_precision_options_of_each_stack() -> None:
    from compstack import targets as registry
    from compstack.explain.attribute import chosen_precision

    ov = registry.get("openvino-cpu")
    assert chosen_precision(ov, {"precision": "bf16"}) == "precision=bf16"
    assert chosen_precision(ov, {"precision": "f32"}) == ""
    assert chosen_precision(registry.get("cann"), {"precision_mode": "force_fp16"}) == "precision_mode=force_fp16"
    assert chosen_precision(registry.get("gcu"), {}) == ""  # its default, not the user's choice
    assert chosen_precision(registry.get("ort-cpu"), {"precision": "bf16"}) == ""


@pytest.mark.slow
def test_explain_names_the_users_bf16_choice(mlp_onnx: Path, isolated_env: Path) -> None:
    from compstack.targets.openvino.target import core

    if "BF16" not in core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
        pytest.skip("this CPU has no bf16 arithmetic: OpenVINO runs precision=bf16 in f32, nothing differs")
    out = isolated_env / "bundle"
    p = run_cli("explain", str(mlp_onnx), "--targets", "openvino-cpu", "--option", "openvino-cpu:precision=bf16",
                "-o", str(out), "--json")
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    att = report["attribution"]
    assert att["culprit"] == "precision" and att["knob"] == "precision=bf16", att
    assert att["summary"].startswith("precision option you chose: precision=bf16")
    issue = next(out.rglob("ISSUE.md")).read_text()
    assert "precision option you chose: precision=bf16" in issue
    assert "op bug" not in issue and "infx" not in issue
    assert "at the precision you chose (precision=bf16), not a stack bug" in report["title"], report["title"]
    assert issue.startswith(f"# {report['title']}")


def test_explain_text_names_the_users_precision_choice_for_the_divergent_node(capsys: pytest.CaptureFixture) -> None:
    from compstack.cli.explain import _print

    report = {"model": "mlp.onnx", "nodes": 3, "found": True, "compiles": 5, "seconds": 2.0, "status": {}, "keep": "openvino-cpu wrong", "label": "",
              "bisect": {"node": {"name": "node_linear", "op_type": "Gemm", "index": 0}, "kind": "op", "compiles": 3,
                         "bound": 3, "seconds": 1.0},
              "attribution": {"culprit": "precision", "knob": "precision=bf16",
                              "summary": "precision option you chose: precision=bf16", "checks": []}}
    _print(report)
    out = capsys.readouterr().out
    assert "wrong alone on the reference inputs: the precision option you chose: precision=bf16" in out, out
    assert "op bug" not in out
    report["attribution"] = {"culprit": "stack", "summary": "tvm-llvm", "checks": []}
    _print(report)
    assert "wrong alone on the reference inputs: an op bug" in capsys.readouterr().out
