"""The PaddlePaddle and MindSpore frontends and their eager targets, each in its own venv.

The real-framework tests carry the ``paddle`` / ``mindspore`` markers and run only where
``COMPSTACK_PADDLE_PYTHON`` / ``COMPSTACK_MINDSPORE_PYTHON`` name that environment's Python
(``scripts/setup_paddle_env.sh``, ``scripts/setup_mindspore_env.sh``). The missing-setting
tests run everywhere.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from compstack.core.config import settings
from compstack.core.errors import UserError
from compstack.frontends.from_framework import import_framework
from compstack.frontends.sources import resolve_model
from compstack.run.session import CompareOptions, compare
from conftest import run_cli, said

needs_paddle = pytest.mark.skipif(not os.environ.get("COMPSTACK_PADDLE_PYTHON"),
                                  reason="set COMPSTACK_PADDLE_PYTHON (scripts/setup_paddle_env.sh)")
needs_mindspore = pytest.mark.skipif(not os.environ.get("COMPSTACK_MINDSPORE_PYTHON"),
                                     reason="set COMPSTACK_MINDSPORE_PYTHON (scripts/setup_mindspore_env.sh)")

PADDLE_MODEL = '''
import numpy as np
import paddle

class Net(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv = paddle.nn.Conv2D(3, 8, 3, padding=1)
        self.bn = paddle.nn.BatchNorm2D(8)
        self.fc = paddle.nn.Linear(8, 4)

    def forward(self, image):
        h = paddle.nn.functional.relu(self.bn(self.conv(image)))
        return self.fc(h.mean(axis=[2, 3]))

def build():
    paddle.seed(0)
    net = Net()
    net.bn._mean.set_value(paddle.to_tensor(np.linspace(-0.2, 0.2, 8).astype("float32")))
    net.bn._variance.set_value(paddle.to_tensor(np.linspace(0.5, 1.5, 8).astype("float32")))
    return net, (np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype("float32"),)

def not_a_model():
    return "layer", np.zeros(3, "float32")

def export_fails():
    class Bad(paddle.nn.Layer):
        def forward(self, x):
            return paddle.linalg.svd(x)[1]  # paddle2onnx has no converter: it aborts the process
    return Bad(), (np.eye(4, dtype="float32"),)
'''

MINDSPORE_MODEL = '''
import numpy as np
import mindspore as ms
from mindspore import nn

class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, pad_mode="same", has_bias=True)
        self.relu = nn.ReLU()
        self.fc = nn.Dense(8, 4)

    def construct(self, image):
        return self.fc(self.relu(self.conv(image)).mean(axis=(2, 3)))

def build():
    ms.set_seed(0)
    return Net(), (np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32),)

def not_a_model():
    return 1.5, np.zeros(3, np.float32)
'''


def _compare(spec: str, targets: list[str], tmp: Path):
    source = resolve_model(spec)
    report = compare(source, CompareOptions(targets=targets, latency=None),
                     settings(cache_dir=tmp / "cache", db=tmp / "r.sqlite"))
    return source, {r.target: r for r in report.results}, report


def _assert_close(rows, names, limit: float) -> None:
    for name in names:
        assert rows[name].status == "ok", (name, rows[name].error)
        assert all(o["max_abs_err"] < limit for o in rows[name].outputs), (name, rows[name].outputs)


@pytest.mark.parametrize("var, title, script", [
    ("COMPSTACK_PADDLE_PYTHON", "PaddlePaddle", "scripts/setup_paddle_env.sh"),
    ("COMPSTACK_MINDSPORE_PYTHON", "MindSpore", "scripts/setup_mindspore_env.sh"),
])
def test_without_the_setting_one_line_says_what_to_do(tmp_path: Path, var: str, title: str, script: str) -> None:
    model = tmp_path / "m.py"
    model.write_text(PADDLE_MODEL if "PADDLE" in var else MINDSPORE_MODEL)
    proc = run_cli("compare", f"{model}:build", "--targets", "ort-cpu", "--no-latency", "--db",
                   str(tmp_path / "r.sqlite"), env={var: ""}, timeout=120)
    assert proc.returncode == 2
    lines = said(proc.stdout + proc.stderr)
    assert lines == [(f"compstack: error: {title} runs in its own environment: {script} DIR, then export "
                     f"{var}=DIR/bin/python")]
    proc = run_cli("compare", f"{model}:build", "--targets", "ort-cpu", env={var: str(tmp_path / "nope")},
                   timeout=120)
    assert proc.returncode == 2 and f"{var}={tmp_path / 'nope'}: no such file" in proc.stderr


def test_a_python_without_the_framework_is_one_line(tmp_path: Path) -> None:
    import sys

    model = tmp_path / "m.py"
    model.write_text(MINDSPORE_MODEL)
    proc = run_cli("compare", f"{model}:build", "--targets", "ort-cpu",
                   env={"COMPSTACK_MINDSPORE_PYTHON": sys.executable}, timeout=120)
    assert proc.returncode == 2
    lines = said(proc.stdout + proc.stderr)
    assert lines == [(f"compstack: error: m.py:build: COMPSTACK_MINDSPORE_PYTHON={sys.executable}: mindspore not "
                     f"installed in {sys.executable}; create it with scripts/setup_mindspore_env.sh DIR, then "
                     "export COMPSTACK_MINDSPORE_PYTHON=DIR/bin/python")]


def test_zoo_lists_framework_models_only_where_the_framework_is_available() -> None:
    import subprocess
    import sys

    code = "from compstack.frontends import zoo; print(' '.join(zoo.names(available_only=True)))"
    env = {**os.environ, "COMPSTACK_PADDLE_PYTHON": "", "COMPSTACK_MINDSPORE_PYTHON": ""}
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    listed = proc.stdout.split()
    assert "paddle-mlp" not in listed and "ms-mlp" not in listed
    assert {"mlp", "cnn", "jax-mlp"} <= set(listed)


@pytest.mark.paddle
@needs_paddle
def test_paddle_model_agrees_on_ort_and_paddle(tmp_path: Path) -> None:
    (tmp_path / "pnet.py").write_text(PADDLE_MODEL)
    source, rows, report = _compare(f"{tmp_path / 'pnet.py'}:build", ["ort-cpu", "paddle"], tmp_path)
    assert source.framework == "paddle" and list(source.example_inputs) == ["image"]
    assert source.model.metadata_props["compstack.framework.exporter"] == "paddle2onnx"
    assert any(n.metadata_props.get("compstack.source", "").startswith("paddle:Conv") for n in source.model.graph)
    _assert_close(rows, ["ort-cpu", "paddle"], 1e-5)
    out = source.model.graph.outputs[0].name
    np.testing.assert_allclose(report.arrays[f"paddle::{out}"], report.arrays[f"ort-cpu::{out}"], rtol=1e-4,
                               atol=1e-5)


@pytest.mark.paddle
@needs_paddle
@pytest.mark.parametrize("func, message", [
    ("not_a_model", r"pnet.py:not_a_model: expected build\(\) to return .* got a pair of \(str, ndarray\)"),
    ("export_fails", (r"pnet.py:export_fails: the PaddlePaddle process died \(signal 6\): \[ERROR\]\[Paddle2ONNX\] "
                     r"Due to the unsupported operators, the conversion is aborted")),
])
def test_paddle_bad_builds_are_one_line_exit_2(tmp_path: Path, func: str, message: str) -> None:
    (tmp_path / "pnet.py").write_text(PADDLE_MODEL)
    proc = run_cli("compare", f"{tmp_path / 'pnet.py'}:{func}", "--targets", "ort-cpu", "--no-latency",
                   "--db", str(tmp_path / "r.sqlite"), timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = said(proc.stdout + proc.stderr)
    assert len(lines) == 1 and re.search(message, lines[0]), lines


@pytest.mark.paddle
@needs_paddle
def test_zoo_paddle_mlp_and_the_paddle_row_refuses_other_models(tmp_path: Path) -> None:
    _, rows, _ = _compare("zoo:paddle-mlp", ["ort-cpu", "paddle", "tf"], tmp_path)
    _assert_close(rows, ["ort-cpu", "paddle"], 1e-5)
    assert rows["tf"].status == "unsupported" and rows["tf"].error.endswith("this one is from paddle")


@pytest.mark.mindspore
@needs_mindspore
def test_mindspore_model_agrees_on_ort_and_mindspore(tmp_path: Path) -> None:
    (tmp_path / "msnet.py").write_text(MINDSPORE_MODEL)
    source, rows, report = _compare(f"{tmp_path / 'msnet.py'}:build", ["ort-cpu", "mindspore"], tmp_path)
    assert source.framework == "mindspore"
    assert source.model.metadata_props["compstack.framework.exporter"] == "mindspore.onnx"
    _assert_close(rows, ["ort-cpu", "mindspore"], 1e-5)
    out = source.model.graph.outputs[0].name
    np.testing.assert_allclose(report.arrays[f"mindspore::{out}"], report.arrays[f"ort-cpu::{out}"], rtol=1e-4,
                               atol=1e-5)


@pytest.mark.mindspore
@needs_mindspore
def test_mindspore_bad_build_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "msnet.py").write_text(MINDSPORE_MODEL)
    with pytest.raises(UserError, match=r"^msnet.py:not_a_model: expected build\(\) to return .*\(float, ndarray\)$"):
        import_framework(tmp_path / "msnet.py", "not_a_model", "mindspore", "msnet.py:not_a_model")


@pytest.mark.mindspore
@needs_mindspore
def test_zoo_ms_mlp(tmp_path: Path) -> None:
    _, rows, _ = _compare("zoo:ms-mlp", ["ort-cpu", "mindspore"], tmp_path)
    _assert_close(rows, ["ort-cpu", "mindspore"], 1e-5)
