"""A JAX function with a primitive compstack cannot convert still runs on XLA's native path:
only the rows that need the common IR become ``unsupported``, naming the primitive's line,
and the native row is compared against a float64 run of the same JAX program."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli

pytest.importorskip("jax")

MODEL = '''\
import jax.numpy as jnp
import numpy as np


def f(a):
    w = jnp.linalg.eigh(a + a.T)[0]
    return jnp.tanh(a).sum(axis=0) * 2.0 + w


def build():
    a = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    return f, (a,)
'''
EIGH_LINE = 6


def test_unconvertible_primitive_costs_only_the_rows_that_need_onnx(isolated_env: Path) -> None:
    src = isolated_env / "eigh_model.py"
    src.write_text(MODEL)
    outs = isolated_env / "outs.npz"
    proc = run_cli("compare", f"{src}:build", "--targets", "xla-cpu,ort-cpu,inductor-cpu", "--json", "--no-latency",
                   "--save-outputs", str(outs))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    rows = {r["target"]: r for r in data["results"]}
    for name in ("ort-cpu", "inductor-cpu"):
        assert rows[name]["status"] == "unsupported" and rows[name]["stage"] == "import"
        assert "'eigh'" in rows[name]["error"] and f"{src}:{EIGH_LINE}" in rows[name]["error"]
    xla = rows["xla-cpu"]
    assert xla["status"] == "ok" and xla["flags"]["path"] == "native", (xla["stage"], xla["error"])
    assert data["reference"]["target"] == "xla-cpu" and data["reference"]["precision"] == "float64"
    assert "eigh" in data["model"]["import_error"]
    (out,) = xla["outputs"]
    assert out["ok"] and out["max_abs_err"] < 1e-4
    saved = np.load(outs)
    ref = saved["xla-cpu@x64::output_0"]
    assert ref.dtype == np.float64 and saved["xla-cpu::output_0"].dtype == np.float32
    a = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32).astype(np.float64)
    expected = np.tanh(a).sum(axis=0) * 2.0 + np.linalg.eigh(a + a.T)[0]  # float64 numpy, independently
    np.testing.assert_allclose(ref, expected, rtol=1e-10, atol=1e-12)


def test_other_commands_still_refuse_a_model_without_common_ir(isolated_env: Path) -> None:
    src = isolated_env / "eigh_model.py"
    src.write_text(MODEL)
    proc = run_cli("lower", f"{src}:build", "--target", "ort-cpu", "-o", str(isolated_env / "out"))
    assert proc.returncode == 2 and "'eigh'" in proc.stderr and "Traceback" not in proc.stderr
