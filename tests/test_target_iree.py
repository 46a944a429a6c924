"""The ``iree-llvm-cpu`` target and :mod:`compstack.core.tools`: stages, numerics, artifacts, errors."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

import models as M
from compstack.core import ir as cir
from compstack.core import tools
from compstack.core.errors import ToolError, UnavailableError, UnsupportedError

pytest.importorskip("iree.compiler")
pytest.importorskip("iree.runtime")

from compstack.targets.iree.target import IreeLlvmCpuTarget, IreeOptions  # noqa: E402

if not IreeLlvmCpuTarget.availability().ok:
    pytest.skip(IreeLlvmCpuTarget.availability().reason, allow_module_level=True)

BUILDERS = {"mlp": M.mlp, "conv_bn_relu": M.conv_bn_relu, "embedding": M.embedding,
            "two_outputs": M.two_outputs}
STAGES = ["torch-onnx", "input", "abi", "preprocessing", "global-optimization", "dispatch-creation", "flow",
          "stream", "executable-sources", "executable-configurations", "executable-targets", "hal", "vm"]


@pytest.fixture
def fresh_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Let a test change COMPSTACK_* variables; the cached settings are reset around it."""
    tools.tool_settings.cache_clear()
    tools.find_tool.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    tools.tool_settings.cache_clear()
    tools.find_tool.cache_clear()


@pytest.fixture(scope="module")
def built() -> dict:
    """name -> (proto, lowered, compiled): each model lowered and compiled once."""
    target = IreeLlvmCpuTarget()
    out = {}
    for name, build in BUILDERS.items():
        proto = build()
        lowered = target.lower(cir.from_proto(proto, source=name))
        out[name] = (proto, lowered, lowered.compile())
    return out


@pytest.mark.parametrize("name", list(BUILDERS))
def test_stages(built: dict, name: str) -> None:
    _, lowered, compiled = built[name]
    assert lowered.stage_names() == STAGES
    assert 'torch.operator "onnx.' in lowered.as_text("torch-onnx")
    assert "torch.operator" not in lowered.as_text("input")
    flow = lowered.as_text("flow")
    assert "flow.executable" in flow and "flow.dispatch @" in flow
    assert "vm.module" in lowered.as_text("vm")
    assert compiled.function == name  # IREE names the entry function after the graph


def test_stage_text_is_elided_and_locations_kept_on_disk(built: dict) -> None:
    _, lowered, _ = built["mlp"]
    text = lowered.as_text("torch-onnx")
    assert '"0x...<' in text and "loc(" not in text  # weights elided, locations dropped
    on_disk = (lowered.scratch.path / "model.mlir").read_text()
    for node in ("matmul", "add", "relu"):  # ONNX node names kept as MLIR locations
        assert f'loc("{node}")' in on_disk


@pytest.mark.parametrize("name", list(BUILDERS))
def test_numerics_vs_reference(built: dict, name: str) -> None:
    proto, _, compiled = built[name]
    feeds = M.inputs_for(proto, seed=3)
    got, want = compiled.run(feeds), M.reference(proto, feeds)
    assert set(got) == set(want)
    for k, ref in want.items():
        assert got[k].shape == ref.shape and got[k].dtype == ref.dtype, k
        np.testing.assert_allclose(got[k], ref, atol=1e-5, rtol=1e-4, err_msg=k)


@pytest.mark.parametrize("name", ["mlp", "two_outputs"])
def test_save_load_roundtrip(built: dict, name: str, tmp_path: Path) -> None:
    proto, lowered, compiled = built[name]
    feeds = M.inputs_for(proto, seed=4)
    first = compiled.run(feeds)
    files = compiled.save(tmp_path)
    assert files == [tmp_path / "model.vmfb"] and files[0].read_bytes() == compiled.vmfb
    loaded = IreeLlvmCpuTarget().load_compiled(tmp_path, lowered.model)
    assert loaded.function == compiled.function
    again = loaded.run(feeds)
    for k in first:
        np.testing.assert_array_equal(again[k], first[k])


def test_run_command_runs_the_artifact(built: dict, tmp_path: Path) -> None:
    _, _, compiled = built["two_outputs"]
    compiled.save(tmp_path)
    argv = shlex.split(compiled.run_command)
    assert f"--module={(tmp_path / 'model.vmfb').resolve()}" in argv
    assert "--function=two_outputs" in argv and argv.count("--input=3x7xf32=0") == 2
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "result[1]" in res.stdout


def test_prepare(built: dict) -> None:
    proto, _, compiled = built["embedding"]
    feeds = M.inputs_for(proto, seed=5)
    out = compiled.prepare(feeds)()
    np.testing.assert_array_equal(out.to_host(), compiled.run(feeds)["y"])


def test_flags() -> None:
    target = IreeLlvmCpuTarget(IreeOptions(extra_flags=("--iree-opt-level=O3",), driver="local-sync"))
    flags = target.flags()
    assert flags["iree-compile"] == ["--iree-hal-target-device=local",
                                     "--iree-hal-local-target-device-backends=llvm-cpu",
                                     "--iree-llvmcpu-target-cpu=host", "--iree-opt-level=O3"]
    assert flags["driver"] == "local-sync"
    opts = IreeOptions.from_strings({"extra_flags": "--a,--b", "compile_timeout_s": "5"})
    assert opts.extra_flags == ("--a", "--b") and opts.compile_timeout_s == 5.0


def test_plain_iree_import_onnx_and_local_sync() -> None:
    proto = M.mlp()
    target = IreeLlvmCpuTarget(IreeOptions(keep_locations=False, driver="local-sync"))
    lowered = target.lower(cir.from_proto(proto))
    assert "loc(" not in (lowered.scratch.path / "model.mlir").read_text()
    feeds = M.inputs_for(proto)
    np.testing.assert_allclose(lowered.compile().run(feeds)["y"], M.reference(proto, feeds)["y"],
                               atol=1e-5, rtol=1e-4)


def test_local_functions_are_inlined() -> None:
    proto = M.with_function()
    model = cir.from_proto(proto)
    feeds = M.inputs_for(proto)
    out = IreeLlvmCpuTarget().lower(model).compile().run(feeds)
    np.testing.assert_allclose(out["y"], M.reference(proto, feeds)["y"], atol=1e-5, rtol=1e-4)
    assert [n.op_type for n in model.graph] == ["Block", "Block"]  # the caller's model is untouched


def test_unsupported_op_names_op_and_node() -> None:
    with pytest.raises(UnsupportedError) as info:
        IreeLlvmCpuTarget().lower(cir.from_proto(M.with_ops("MelWeightMatrix")))
    assert info.value.ops == ["MelWeightMatrix"]
    assert "mel_0" in str(info.value)
    assert isinstance(info.value.__cause__, ToolError)


def test_timeout_kills_the_tool() -> None:
    target = IreeLlvmCpuTarget(IreeOptions(compile_timeout_s=0.01))
    with pytest.raises(tools.ToolTimeoutError) as info:
        target.lower(cir.from_proto(M.mlp()))
    assert info.value.returncode == 124 and "timed out" in str(info.value.stderr_tail)


# ---- compstack.core.tools -----------------------------------------------------------------


def test_find_tool_bundled_and_missing(fresh_settings: pytest.MonkeyPatch, tmp_path: Path) -> None:
    compile_ = tools.find_tool("iree-compile")
    assert compile_.is_absolute() and compile_.name == "iree-compile"
    with pytest.raises(UnavailableError, match="not found"):
        tools.find_tool("compstack-no-such-tool")
    # Nothing bundled, no console script, empty PATH: the message names the package.
    fresh_settings.setattr(tools, "_BUNDLED", {})
    fresh_settings.setattr(sys, "executable", str(tmp_path / "python"))
    fresh_settings.setenv("PATH", str(tmp_path))
    with pytest.raises(UnavailableError, match="pip install iree-base-runtime"):
        tools.find_tool("iree-run-module")


def test_find_tool_env_override(fresh_settings: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = tools.find_tool("iree-compile")
    fresh_settings.setenv("COMPSTACK_TOOL_IREE_COMPILE", str(real))
    tools.tool_settings.cache_clear()
    tools.find_tool.cache_clear()
    assert tools.find_tool("iree-compile") == real.resolve()
    fresh_settings.setenv("COMPSTACK_TOOL_IREE_COMPILE", str(tmp_path / "nope"))
    tools.tool_settings.cache_clear()
    tools.find_tool.cache_clear()
    with pytest.raises(UnavailableError, match="COMPSTACK_TOOL_IREE_COMPILE"):
        tools.find_tool("iree-compile")


def test_run_tool_error_carries_stderr(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text("this is not mlir\n")
    with pytest.raises(ToolError) as info:
        tools.run_tool([tools.find_tool("iree-compile"), bad, "-o", tmp_path / "out.vmfb"])
    err = info.value
    assert err.returncode != 0 and err.argv[1] == str(bad) and err.stderr_tail and err.temps is None
    assert "iree-compile exited with status" in str(err)


def test_save_temps_keeps_files_and_commands(fresh_settings: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fresh_settings.setenv("COMPSTACK_SAVE_TEMPS", str(tmp_path / "temps"))
    lowered = IreeLlvmCpuTarget().lower(cir.from_proto(M.mlp()))
    lowered.as_text("flow")
    lowered.compile()
    folder = lowered.scratch.path
    assert folder.parent == (tmp_path / "temps").resolve() and lowered.scratch.kept
    kept = {p.name for p in folder.iterdir()}
    assert {"import_onnx.py", "model.onnx", "model.mlir", "input.mlir", "flow.mlir", "model.vmfb"} <= kept
    commands = (tmp_path / "temps" / "commands.txt").read_text()
    assert "--compile-to=input" in commands and "--compile-to=flow" in commands
    assert commands.count("iree-compile") == 3 and str(folder) in commands
    assert f"{folder / 'import_onnx.py'} {folder / 'model.onnx'} {folder / 'model.mlir'}" in commands
    # the kept script replays the import that ran in the worker, alone (no compstack on its path)
    again = subprocess.run([sys.executable, "-P", str(folder / "import_onnx.py"), str(folder / "model.onnx"),
                            str(tmp_path / "again.mlir")], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert (tmp_path / "again.mlir").read_text() == (folder / "model.mlir").read_text()
    with pytest.raises(ToolError) as info:
        tools.run_tool([tools.find_tool("iree-compile"), folder / "missing.mlir"], temps=lowered.scratch)
    assert info.value.temps == folder and str(folder) in str(info.value)


@pytest.mark.parametrize("executor", ["process", "daemon"])
def test_a_job_leaves_no_scratch_behind(executor: str, tmp_path: Path) -> None:
    # IREE's scratch (the imported MLIR and the .vmfb: several times the weights) was left
    # in the temp folder by every job: a worker leaves by os._exit, so no finaliser ran, and
    # a real-tier sweep filled the disk with them
    from conftest import make_mlp, run_cli

    temp = tmp_path / "temp"
    temp.mkdir()
    env = {"TMPDIR": str(temp), "COMPSTACK_EXECUTOR": executor, "COMPSTACK_CACHE_DIR": str(tmp_path / "cache"),
           "COMPSTACK_DB": str(tmp_path / "db.sqlite")}
    model = make_mlp(tmp_path / "mlp.onnx")
    proc = run_cli("compare", str(model), "--targets", "iree-llvm-cpu", "--no-latency", "--no-cache", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_cli("daemon", "stop", "--current", env=env)
    assert sorted(p.name for p in temp.rglob("compstack-iree-*")) == []


def test_a_killed_jobs_scratch_is_removed_by_its_executor(tmp_path: Path) -> None:
    from compstack.run.executors import _lost
    from compstack.run.jobs import Job
    from compstack.run.runner import Limits

    job = Job(model_path="", fingerprint="", target="iree-llvm-cpu", target_ref="", inputs_path="",
              workdir=str(tmp_path / "job"))
    with _in_job_root(job.tmp_path) as scratch:
        (scratch.path / "model.mlir").write_text("module {}")
        assert scratch.path.parent == job.tmp_path
        out = _lost(job, "timeout", Limits(timeout_s=1.0), log="")
        assert out.status == "timeout" and not job.tmp_path.exists()


class _in_job_root:
    """A Scratch made under ``root``, as a worker makes it during a job."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __enter__(self) -> tools.Scratch:
        tools.scratch_root(self.root)
        self.scratch = tools.Scratch("iree")
        return self.scratch

    def __exit__(self, *exc: object) -> None:
        tools.scratch_root(None)
        self.scratch.cleanup()
