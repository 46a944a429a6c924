"""Adding a stack (docs/adding-a-stack.md): a toy target defined under tests/ and registered
from outside the package runs through ``compstack compare`` end to end, and shows up in every
listing that asks targets for their capabilities; no module outside ``compstack/targets/``
lists target names."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from compstack import targets as registry
from conftest import TESTS, make_mlp, run_cli

FAST = ["--min-runs", "3", "--min-time", "0", "--warmup", "1"]
PACKAGE = TESTS.parent / "compstack"


@pytest.fixture
def toy_env(isolated_env: Path) -> dict[str, str]:
    """An installed-looking distribution whose ``compstack.targets`` entry point is the toy
    (what a third-party package's ``[project.entry-points."compstack.targets"]`` makes)."""
    dist = isolated_env / "site" / "compstack_toy-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: compstack-toy\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[compstack.targets]\ntoy-numpy = toy_target:ToyNumpyTarget\n")
    path = os.pathsep.join([str(TESTS), str(isolated_env / "site"), os.environ.get("PYTHONPATH", "")])
    return {"PYTHONPATH": path}


def test_toy_stack_is_listed(toy_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for folder in toy_env["PYTHONPATH"].split(os.pathsep)[:2]:
        monkeypatch.syspath_prepend(folder)
    assert "toy-numpy" in registry.names() and "toy-numpy" in registry.resolve("cpu")
    avail = registry.get("toy-numpy").availability()  # what `compstack targets` shows
    assert avail.ok and dict(avail.versions) == {"numpy": np.__version__}
    assert registry.capability("toy-numpy", "stack") == "toy"
    assert registry.custom_op_support({"cpu"})["toy-numpy"] == "no: the toy stack takes no custom ops"


def test_toy_stack_runs_through_compare(toy_env: dict[str, str], isolated_env: Path) -> None:
    model = make_mlp(isolated_env / "mlp.onnx")

    done = run_cli("compare", str(model), "--targets", "toy-numpy", "--json",
                   "--save-inputs", str(isolated_env / "in.npz"), "--save-outputs", str(isolated_env / "out.npz"),
                   *FAST, env=toy_env)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    res = {r["target"]: r for r in data["results"]}
    toy = res["toy-numpy"]
    assert toy["status"] == "ok", toy
    assert toy["outputs"][0]["ok"] is True and toy["outputs"][0]["max_abs_err"] < 1e-4
    assert toy["latency_ms"]["median"] > 0

    # the values are the MLP's, computed here from its weights
    proto = onnx.load(model)
    w = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    with np.load(isolated_env / "in.npz") as feeds:
        x = feeds["x"]
    with np.load(isolated_env / "out.npz") as outs:
        got = outs["toy-numpy::y"]
    want = np.maximum(x @ w["w1"] + w["b1"], 0) @ w["w2"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    again = run_cli("compare", str(model), "--targets", "toy-numpy", "--json", "--no-latency", env=toy_env)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["results"][0]["cached"] is True  # its artifact went through the store

    ops = run_cli("ops", "list", "--json", env=toy_env)
    assert ops.returncode == 0, ops.stderr
    assert all(r["stacks"]["toy-numpy"] == "no: the toy stack takes no custom ops" for r in json.loads(ops.stdout))


def test_toy_stack_unsupported_op_is_one_row(toy_env: dict[str, str], isolated_env: Path) -> None:
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Tanh", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    path = isolated_env / "tanh.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    done = run_cli("compare", str(path), "--targets", "toy-numpy", "--json", "--no-latency", env=toy_env)
    row = json.loads(done.stdout)["results"][0]
    assert row["status"] == "unsupported" and row["unsupported_ops"] == ["Tanh"], row


def test_roles_come_from_the_table() -> None:
    from compstack.run.optest import DEFAULT_TARGETS

    assert DEFAULT_TARGETS == tuple(registry.with_role("ops-test")) and DEFAULT_TARGETS
    name, opts = registry.role_target("native-jax-reference")
    assert registry.capability(name, "native_framework") == "jax" and opts
    with pytest.raises(KeyError):
        registry.with_role("no-such-role")
    assert registry.capability("ort-cpu", "custom_op_needs")  # declared on the class
    assert registry.capability("xla-cuda", "custom_op_support")  # declared on the row


def test_no_module_outside_targets_lists_target_names() -> None:
    """Only ``compstack/targets/`` spells target names; others ask the registry. Names that
    double as ordinary words (``reference``, the framework names ``tf``/``paddle``/``mindspore``)
    are not checked."""
    words = {"reference", "tf", "paddle", "mindspore"}
    names = {e.name for e in registry.entries()} - words
    hits = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if rel.startswith("compstack/targets/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                hits.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert not hits, "\n".join(hits)
