"""The TensorRT target where TensorRT is absent: it lists, says why, and imports."""

from __future__ import annotations

import builtins
import importlib
import json
import sys

import pytest

from compstack.targets.trt import target as trt_target
from conftest import run_cli


def _tensorrt_missing() -> bool:
    try:
        import tensorrt  # noqa: F401
    except Exception:  # noqa: BLE001
        return True
    return False


@pytest.fixture
def no_tensorrt(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``import tensorrt`` fail even where it is installed."""
    real = builtins.__import__

    def fake(name, *args, **kwargs):
        if name == "tensorrt" or name.startswith("tensorrt."):
            raise ImportError("No module named 'tensorrt'")
        return real(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "tensorrt", raising=False)
    monkeypatch.setattr(builtins, "__import__", fake)


def test_module_imports_without_tensorrt(no_tensorrt: None) -> None:
    module = importlib.reload(trt_target)
    assert module.TensorRTTarget.name == "tensorrt"
    assert module.TensorRTTarget.device == "cuda"
    assert module.TensorRTTarget.stage_names == ("onnx", "layers")
    assert "tensorrt" not in sys.modules


def test_availability_says_why(no_tensorrt: None) -> None:
    avail = trt_target.TensorRTTarget.availability()
    assert not avail.ok
    assert avail.reason == trt_target.NOT_INSTALLED
    assert "NVIDIA's server" in avail.reason and "NVIDIA GPU" in avail.reason


def test_registry_resolves_tensorrt() -> None:
    from compstack import targets as registry

    assert registry.get("tensorrt") is trt_target.TensorRTTarget
    assert "tensorrt" in registry.resolve("cuda")


def test_options_validate() -> None:
    from compstack.core.errors import UserError

    opts = trt_target.TrtOptions.from_strings({"precision": "fp16", "workspace_mib": "512"}, owner="tensorrt")
    assert opts.precision == "fp16" and opts.workspace_mib == 512
    with pytest.raises(UserError, match="precision=int3"):
        trt_target.TrtOptions.from_strings({"precision": "int3"}, owner="tensorrt")


@pytest.mark.skipif(not _tensorrt_missing(), reason="tensorrt is installed here")
def test_targets_json_lists_tensorrt_with_reason(isolated_env) -> None:
    proc = run_cli("targets", "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    row = rows["tensorrt"]
    assert row["available"] is False and row["device"] == "cuda"
    assert row["reason"] == trt_target.NOT_INSTALLED
