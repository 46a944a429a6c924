"""The Python API (issue #12, part 5): the public surface of ``import compstack`` (as onnx_ir's
``public_api_test.py`` checks its own), that importing it loads no stack, that its functions
run real stacks, and that the "From Python" guide's example (docs/guides/python.md) runs as written."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import compstack  # noqa: E402
from compstack.core.errors import UserError  # noqa: E402
from conftest import make_mlp  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

#: The curated surface. Adding a name is a decision: add it here, with a docstring.
EXPECTED = [
    "__version__", "targets",
    "CompareOptions", "DumpResult", "KernelsOptions", "LatencyConfig", "Limits", "LowerOptions", "LowerRequest",
    "Report", "Result", "SourceModel", "Target", "TargetKernels",
    "compare", "default_memory_mb", "dump", "explain_feeds", "explain_model", "kernels", "load_model", "lower",
    "profile", "resolve_target", "resolve_targets", "run_conformance", "target_rows", "validate_target_options",
]

HEAVY = ("torch", "jax", "tvm", "iree", "onnxruntime", "openvino", "tensorflow", "tensorrt", "transformers", "onnx")


def test_all_is_exactly_the_curated_list() -> None:
    assert compstack.__all__ == EXPECTED
    api = importlib.import_module("compstack.api")
    assert sorted(api.__all__) == sorted(set(EXPECTED) - {"__version__", "targets"})


def test_no_private_names_and_every_name_resolves_with_a_docstring() -> None:
    for name in compstack.__all__:
        assert name == "__version__" or not name.startswith("_"), name
        value = getattr(compstack, name)
        if name == "__version__":
            assert isinstance(value, str) and re.match(r"\d+\.\d+", value), value
            continue
        doc = inspect.getdoc(value)
        assert doc and len(doc) > 20, f"compstack.{name} has no docstring"


def test_public_functions_are_typed() -> None:
    for name in compstack.__all__:
        value = getattr(compstack, name)
        if inspect.isfunction(value):
            sig = inspect.signature(value)
            assert sig.return_annotation is not inspect.Signature.empty, name
            for p in sig.parameters.values():
                assert p.annotation is not inspect.Parameter.empty, f"{name}({p.name})"


def test_names_are_not_shadowed_by_subpackages() -> None:
    # importing compstack.explain (a subpackage) sets compstack.explain; no API name may collide
    for sub in ("conformance", "explain", "fusion", "sweep", "fuzz", "report", "run", "frontends", "analysis"):
        importlib.import_module(f"compstack.{sub}")
    api = importlib.import_module("compstack.api")
    for name in api.__all__:
        assert getattr(compstack, name) is getattr(api, name), name
    assert compstack.targets is importlib.import_module("compstack.targets")
    assert "ort-cpu" in compstack.targets.names()
    with pytest.raises(AttributeError):
        compstack.no_such_name  # noqa: B018


@pytest.mark.parametrize("stmt", ["import compstack", "import compstack.core.errors",
                                  "import compstack; compstack.__all__; compstack.__version__"])
def test_import_loads_no_stack(stmt: str) -> None:
    code = f"import sys; {stmt}; print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    assert out.strip() == "[]"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COMPSTACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COMPSTACK_DB", str(tmp_path / "results.sqlite"))
    return tmp_path


def test_compare_runs_real_stacks_and_stores_the_run(env: Path) -> None:
    model = make_mlp(env / "mlp.onnx")
    source = compstack.load_model(str(model))
    assert source.fingerprint and len(source.model.graph) == 4
    opts = compstack.CompareOptions(targets=[], latency=None, seed=3)
    report = compstack.compare(source, "ort-cpu", options=opts)
    assert [r.target for r in report.results] == ["ort-cpu"]
    row = report.results[0]
    assert row.status == "ok", (row.stage, row.error)
    errs = [o["max_abs_err"] for o in row.outputs]
    assert errs and all(0 <= e < 1e-4 for e in errs), row.outputs  # float32 ORT vs the float64 reference
    assert row.latency_ms is None  # latency=None: no timing
    assert (env / "results.sqlite").is_file()
    assert json.loads(json.dumps(report.to_json(), default=str))["results"][0]["status"] == "ok"


def test_lower_writes_artifact_and_manifest(env: Path) -> None:
    model = make_mlp(env / "mlp.onnx")
    manifest = compstack.lower(str(model), "ort-cpu", env / "out",
                               compstack.LowerOptions(target_options={"opt_level": "basic"}))
    assert manifest["status"] == "ok", manifest
    on_disk = json.loads((env / "out" / "manifest.json").read_text())
    assert on_disk["status"] == "ok" and on_disk["target"] == "ort-cpu"
    assert manifest["artifacts"] and all((env / "out" / a).is_file() for a in manifest["artifacts"])


def test_bad_input_is_a_user_error_naming_it(env: Path) -> None:
    with pytest.raises(UserError, match="unknown target 'no-such'"):
        compstack.resolve_targets("no-such")
    with pytest.raises(UserError, match="names .* targets"):
        compstack.resolve_target("cpu")
    with pytest.raises(UserError, match="opt_levl|opt_level"):
        compstack.validate_target_options({"ort-cpu": {"opt_levl": "basic"}})
    with pytest.raises(UserError, match="no-such.onnx"):
        compstack.load_model(str(env / "no-such.onnx"))
    with pytest.raises(UserError, match="passes"):
        compstack.dump(str(env / "x.onnx"), "ort-cpu", passes="some")


def readme_snippet() -> str:
    """The first ``python`` block of the "From Python" guide (docs/guides/python.md), as written."""
    text = (ROOT / "docs" / "guides" / "python.md").read_text(encoding="utf-8")
    m = re.search(r"```python\n(.*?)```", text, re.S)
    assert m, "docs/guides/python.md: no python block"
    return m.group(1)


def test_readme_from_python_example_runs(env: Path) -> None:
    code = readme_snippet()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=env, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    rows = {ln.split()[0]: ln.split() for ln in lines[:-1]}
    assert set(rows) == {"ort-cpu", "reference"}, proc.stdout
    for _target, cols in rows.items():
        assert cols[1] == "ok", proc.stdout
        assert 0 <= float(cols[-1]) < 1e-4, proc.stdout  # measured max abs error vs float64
    assert lines[-1].startswith("['reference', 'ort-cpu'"), lines[-1]


def test_options_built_in_python_are_checked_like_the_flags(tmp_path) -> None:  # noqa: ANN001
    import compstack
    from compstack.core.errors import UserError

    for kwargs, message in (({"targets": 123}, "targets must be"),
                            ({"options": {"targets": ["ort-cpu"]}}, "must be a CompareOptions"),
                            ({"options": compstack.CompareOptions(targets=["ort-cpu"], rtol=-1.0)}, "rtol=-1.0"),
                            ({"options": compstack.CompareOptions(
                                targets=["ort-cpu"], latency=compstack.LatencyConfig(min_runs=0))}, "min_runs=0")):
        with pytest.raises(UserError, match=message.replace("(", r"\(")):
            compstack.compare(str(tmp_path / "never-loaded.onnx"), **kwargs)
