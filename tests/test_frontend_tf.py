"""The TensorFlow/Keras frontend and the ``tf`` eager target, with real TensorFlow and tf2onnx.

A Keras model runs in TensorFlow's own process (``python -P``), is exported by tf2onnx, and is
compared on ONNX Runtime and against TensorFlow itself; bad input is one line (exit 2) or
that row's failure.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("tf2onnx")

from compstack.core.config import settings
from compstack.core.errors import UserError
from compstack.frontends.from_framework import detect, import_framework
from compstack.frontends.sources import resolve_model
from compstack.run.session import CompareOptions, compare
from conftest import make_mlp, run_cli, said

KERAS_CNN = '''
import numpy as np
import tensorflow as tf

def build():
    tf.keras.utils.set_random_seed(0)
    layers = tf.keras.layers
    model = tf.keras.Sequential([
        tf.keras.Input((16, 16, 3)),
        layers.Conv2D(8, 3, padding="same", name="conv_a"),
        layers.BatchNormalization(name="bn_a"),
        layers.ReLU(),
        layers.MaxPooling2D(2),
        layers.Conv2D(16, 3, activation="relu", name="conv_b"),
        layers.GlobalAveragePooling2D(),
        layers.Dense(5, name="head"),
    ])
    bn = model.get_layer("bn_a")
    rng = np.random.default_rng(1)
    bn.set_weights([rng.uniform(0.5, 1.5, 8).astype(np.float32), rng.normal(0, 0.2, 8).astype(np.float32),
                    rng.normal(0, 0.2, 8).astype(np.float32), rng.uniform(0.5, 1.5, 8).astype(np.float32)])
    x = np.random.default_rng(0).standard_normal((2, 16, 16, 3)).astype(np.float32)
    return model, (x,)

def build_function():
    w = tf.constant(np.random.default_rng(2).standard_normal((6, 3)).astype(np.float32))

    @tf.function
    def f(a, b):
        return tf.nn.tanh(tf.matmul(a, w)) * b, tf.reduce_sum(a, axis=1)

    rng = np.random.default_rng(3)
    return f, (rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32))

def not_a_model():
    return 42, np.zeros((2, 3), np.float32)

def unconvertible():
    @tf.function
    def f(x):
        return tf.linalg.svd(x, compute_uv=False)
    return f, (np.eye(4, dtype=np.float32),)

def unseeded():
    return tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(3)]), (np.ones((2, 4), np.float32),)

def crash():
    import os
    os.abort()
'''


@pytest.fixture(scope="module")
def model_py(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tfmodel") / "kmodel.py"
    path.write_text(KERAS_CNN)
    return path


def _compare(spec: str, targets: list[str], tmp: Path):
    source = resolve_model(spec)
    opts = CompareOptions(targets=targets, latency=None)
    return source, compare(source, opts, settings(cache_dir=tmp / "cache", db=tmp / "r.sqlite"))


def test_keras_cnn_agrees_on_ort_and_tensorflow(model_py: Path, tmp_path: Path) -> None:
    source, report = _compare(f"{model_py}:build", ["ort-cpu", "tf"], tmp_path)
    assert source.origin == "tf" and source.framework == "tf"
    assert report.reference["target"] == "reference"  # float64 onnx.reference
    rows = {r.target: r for r in report.results}
    for name in ("ort-cpu", "tf"):
        assert rows[name].status == "ok", rows[name].error
        (out,) = rows[name].outputs
        assert out["max_abs_err"] < 1e-5, (name, out)
        assert out["max_abs_err"] > 0 or name == "ort-cpu"  # tf computes in float32: not bit-equal to float64
    # The tf row is TensorFlow's own answer: it must agree with ORT on the exported graph.
    tf_out = report.arrays["tf::" + source.model.graph.outputs[0].name]
    ort_out = report.arrays["ort-cpu::" + source.model.graph.outputs[0].name]
    assert tf_out.shape == (2, 5)
    np.testing.assert_allclose(tf_out, ort_out, rtol=1e-4, atol=1e-5)
    assert float(np.abs(tf_out).max()) > 1e-3  # a real, non-trivial output


def test_provenance_keeps_keras_layer_names(model_py: Path) -> None:
    source = resolve_model(f"{model_py}:build")
    sources = [n.metadata_props.get("compstack.source", "") for n in source.model.graph]
    assert any("conv_b" in s for s in sources) and any("head" in s for s in sources), sources
    convs = [n for n in source.model.graph if n.op_type == "Conv"]
    assert len(convs) == 2 and convs[1].metadata_props["namespace"].endswith("/conv_b_1")
    # Known gap: tf2onnx's optimizer folds conv_a + bn_a into a new node named Conv__N (no layer path).
    assert convs[0].metadata_props["compstack.source"].startswith("tf:Conv__")
    props = source.model.metadata_props
    assert props["compstack.framework.exporter"] == "tf2onnx" and float(props["compstack.framework.export_s"]) > 0


def test_tf_function_with_two_inputs_and_two_outputs(model_py: Path, tmp_path: Path) -> None:
    source, report = _compare(f"{model_py}:build_function", ["ort-cpu", "tf"], tmp_path)
    assert list(source.example_inputs) == ["a", "b"]  # the function's parameter names
    for r in report.results:
        assert r.status == "ok", (r.target, r.error)
        assert len(r.outputs) == 2 and all(o["max_abs_err"] < 1e-5 for o in r.outputs)


def test_detect_reads_imports_without_running(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("raise SystemExit('must not run')\nfrom keras import layers\n")
    assert detect(f) == "tf"
    f.write_text("import torch\n")
    assert detect(f) is None


@pytest.mark.parametrize("func, message", [
    ("not_a_model", r"kmodel.py:not_a_model: expected build\(\) to return \(tf.keras.Model .* got a pair of \(int, ndarray\)"),
    ("unconvertible", r"kmodel.py:unconvertible: tf2onnx wrote an invalid ONNX graph .*Svd"),
    ("crash", r"kmodel.py:crash: the TensorFlow process died \(signal 6\)"),
])
def test_bad_builds_are_one_line_exit_2(model_py: Path, tmp_path: Path, func: str, message: str) -> None:
    proc = run_cli("compare", f"{model_py}:{func}", "--targets", "ort-cpu", "--no-latency",
                   "--db", str(tmp_path / "r.sqlite"), "--cache-dir", str(tmp_path / "c"), timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = said(proc.stdout + proc.stderr)
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    import re

    assert re.search(message, lines[0]), lines[0]


def test_export_time_limit(tmp_path: Path) -> None:
    slow = tmp_path / "slow.py"
    slow.write_text("import time\nimport tensorflow\ntime.sleep(120)\ndef build():\n    pass\n")
    with pytest.raises(UserError, match=r"^slow.py:build: TensorFlow export timed out after 3 s$"):
        import_framework(slow, "build", "tf", "slow.py:build", timeout_s=3)


def test_worker_sees_the_files_folder_but_not_the_current_one(tmp_path: Path, monkeypatch) -> None:
    user, cwd = tmp_path / "user", tmp_path / "cwd"
    user.mkdir(), cwd.mkdir()
    (user / "helper_near.py").write_text("SCALE = 2.0\n")
    (cwd / "shadow_here.py").write_text("raise RuntimeError('imported from the current folder')\n")
    (user / "m.py").write_text(textwrap.dedent('''
        import importlib.util
        import numpy as np
        import tensorflow as tf
        import helper_near

        def build():
            assert importlib.util.find_spec("shadow_here") is None, "cwd is on sys.path"
            f = tf.function(lambda x: x * helper_near.SCALE)
            return f, (np.ones((2, 2), np.float32),)
    '''))
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("PYTHONPATH", str(cwd))
    source = import_framework(user / "m.py", "build", "tf", "m.py:build")
    assert [n.op_type for n in source.model.graph] == ["Mul"]


def test_tf_row_takes_only_tensorflow_models(tmp_path: Path, model_py: Path) -> None:
    onnx_file = make_mlp(tmp_path / "mlp.onnx")
    _, report = _compare(str(onnx_file), ["tf"], tmp_path)
    (row,) = report.results
    assert row.status == "unsupported"
    assert row.error == "tf: runs only models written in TensorFlow (file.py:build or its zoo models); " \
                        "this one is from an ONNX file"


def test_unseeded_build_fails_the_tf_row_with_the_reason(model_py: Path, tmp_path: Path) -> None:
    _, report = _compare(f"{model_py}:unseeded", ["ort-cpu", "tf"], tmp_path)
    rows = {r.target: r for r in report.results}
    assert rows["ort-cpu"].status == "ok"
    assert rows["tf"].status == "failed" and rows["tf"].stage == "run"
    assert "build() gives different weights each time" in rows["tf"].error


def test_zoo_tf_cnn(tmp_path: Path) -> None:
    source, report = _compare("zoo:tf-cnn", ["ort-cpu", "tf"], tmp_path)
    assert source.framework == "tf" and [i.shape for i in source.example_inputs.values()] == [(2, 32, 32, 3)]
    for r in report.results:
        assert r.status == "ok", (r.target, r.error)
        assert r.outputs[0]["max_abs_err"] < 1e-5


def test_import_compstack_and_frontends_import_no_framework() -> None:
    code = ("import sys, compstack\nfrom compstack.frontends.registry import frontend_rows\nrows = frontend_rows()\n"
            "assert [r.name for r in rows] == ['onnx', 'torch', 'jax', 'tf', 'paddle', 'mindspore']\n"
            "assert rows[3].available\n"
            "bad = [m for m in ('tensorflow', 'tf2onnx', 'paddle', 'mindspore', 'torch', 'jax') if m in sys.modules]\n"
            "assert not bad, bad\n")
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_frontends_cli_json() -> None:
    import json

    proc = run_cli("frontends", "--json", env={"COMPSTACK_PADDLE_PYTHON": ""}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert rows["tf"]["available"] and rows["tf"]["versions"]["tf2onnx"]
    assert not rows["paddle"]["available"]
    assert "scripts/setup_paddle_env.sh" in rows["paddle"]["reason"]
