"""Trust, second round (issue #27, class 1): replaying a bundle runs no program it names.

A bundle's ``flags.json`` is untrusted data: on ``explain --replay`` / ``fuzz --replay``
each option passes its stack's allowlist (``compstack/targets/<stack>/replay.py``); the
rest is dropped and listed in one line, ``--trust-bundle-flags`` applies it with a
warning, and a bundle's environment variables are never applied.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import onnx
import pytest

from compstack.targets.common.replay import screen
from conftest import relu_proto, run_cli


def _bundle(folder: Path, flags: dict) -> Path:
    folder.mkdir()
    onnx.save(relu_proto(), str(folder / "model.onnx"))
    np.savez(folder / "inputs.npz", x=np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    (folder / "explain.json").write_text(json.dumps({"target": next(iter(flags))}))
    (folder / "flags.json").write_text(json.dumps(flags))
    return folder


def _tool(tmp: Path) -> tuple[Path, Path]:
    """A program that leaves a marker file when it runs (and then fails, like a bad linker)."""
    marker = tmp / "RAN"
    tool = tmp / "evil-linker"
    tool.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return tool, marker


@pytest.mark.slow
def test_issue_example_iree_linker_path_from_a_bundle_never_runs(tmp_path: Path, isolated_env: Path) -> None:
    """The issue's example: IREE's embedded linker path named by ``flags.json``."""
    tool, marker = _tool(tmp_path)
    flags = {"iree-llvm-cpu": {"options": {"extra_flags": f"--iree-llvmcpu-embedded-linker-path={tool}"},
                               "env": {"LD_PRELOAD": str(tmp_path / "evil.so")}}}
    _bundle(tmp_path / "b", flags)
    done = run_cli("explain", "--replay", "b", cwd=tmp_path, timeout=300)
    assert done.returncode in (0, 1), done.stderr
    assert not marker.exists()
    refused = [line for line in done.stderr.splitlines() if "refused bundle flags" in line]
    assert len(refused) == 1 and "embedded-linker-path" in refused[0] and "env" in refused[0], done.stderr
    assert "iree-llvm-cpu: ok" in done.stdout  # replayed without the dropped flag


@pytest.mark.slow
def test_trust_bundle_flags_applies_them_with_a_warning(tmp_path: Path, isolated_env: Path) -> None:
    """The user's explicit choice restores the flag, with a warning: the named program runs
    (which shows that the refusal above is what kept it from running)."""
    tool, marker = _tool(tmp_path)
    _bundle(tmp_path / "b", {"iree-llvm-cpu": {"options": {
        "extra_flags": f"--iree-llvmcpu-embedded-linker-path={tool}"}}})
    done = run_cli("explain", "--replay", "b", "--trust-bundle-flags", "--json",
                   cwd=tmp_path, timeout=300)
    assert "warning: --trust-bundle-flags" in done.stderr, done.stderr
    assert marker.exists()
    assert json.loads(done.stdout)["targets"]["iree-llvm-cpu"]["status"] != "ok"


@pytest.mark.parametrize("target,options", [
    ("iree-llvm-cpu", {"extra_flags": "--iree-llvmcpu-embedded-linker-path=/bin/sh"}),
    ("iree-llvm-cpu", {"extra_flags": "--iree-llvmcpu-system-linker-path=/usr/bin/ld"}),
    ("iree-llvm-cpu", {"extra_flags": "--iree-hal-target-llvm-cpu-linker=/x"}),
    ("iree-llvm-cpu", {"extra_flags": "--iree-hal-executable-plugin=/tmp/p.so"}),
    ("iree-llvm-cpu", {"extra_flags": "--iree-codegen-transform-dialect-library=spec.mlir"}),
    ("iree-llvm-cpu", {"extra_flags": "--iree-llvmcpu-embedded-linker-path,/bin/sh"}),  # value as next argv
    ("iree-llvm-cpu", {"extra_flags": "--iree-hal-dump-executable-files-to=/etc"}),
    ("iree-llvm-cpu", {"extra_flags": "--iree-plugin=evil"}),
    ("iree-llvm-cpu", {"extra_flags": "--load-pass-plugin=/tmp/p.so"}),
    ("iree-llvm-cpu", {"extra_flags": "--mlir-pass-pipeline-crash-reproducer=/tmp/r"}),
    ("iree-llvm-cpu", {"extra_flags": "--iree-opt-level=../../bin/sh"}),
    ("iree-llvm-cpu", {"target_cpu": "/tmp/x"}),
    ("tvm-llvm", {"cc": "/tmp/evil-cc"}),
    ("tvm-llvm", {"mcpu": "skylake -libs=/tmp/x.so"}),
    ("tvm-llvm", {"disabled_passes": "FuseOps,/tmp/x"}),
    ("ort-cpu", {"session.load_custom_op_library": "/tmp/x.so"}),
    ("ort-cpu", {"register_custom_ops_library": "/tmp/x.so"}),
    ("ort-cpu", {"disabled_optimizers": ["not", "text"]}),
    ("openvino-cpu", {"extensions": "/tmp/x.so"}),
    ("openvino-cpu", {"config_file": "/tmp/plugins.xml"}),
    ("openvino-cpu", {"performance_hint": "latency;CACHE_DIR=/tmp"}),
    ("inductor-cpu", {"backend": "my.module:evil"}),
    ("xla-cpu", {"XLA_FLAGS": "--xla_dump_to=/tmp/x"}),
])
def test_tool_naming_options_are_dropped(target: str, options: dict) -> None:
    kept, dropped = screen(target, {"options": options})
    assert kept == {} and len(dropped) == len(options)
    kept, _ = screen(target, {"options": options}, trust=True)
    assert kept == {k: v for k, v in options.items() if isinstance(v, str)}


@pytest.mark.parametrize("target,options", [
    ("iree-llvm-cpu", {"extra_flags": "--iree-opt-level=O0,--iree-llvmcpu-reassociate-fp-reductions=false",
                       "target_cpu": "znver4", "driver": "local-sync"}),
    ("iree-llvm-cpu", {"extra_flags": "--iree-llvmcpu-target-cpu-features=+avx2"}),
    ("tvm-llvm", {"opt_level": "0", "disabled_passes": "FuseOps,FuseTIR", "mcpu": "skylake-avx512"}),
    ("ort-cpu", {"opt_level": "disable", "disabled_optimizers": "ConvActivationFusion"}),
    ("openvino-cpu", {"precision": "f32", "num_threads": "1"}),
    ("xla-cpu", {"path": "translated", "x64": "true"}),
])
def test_optimisation_options_replay(target: str, options: dict) -> None:
    """What explain's attribution itself writes into bundles still replays."""
    assert screen(target, {"options": options, "flags": {"anything": "recorded only"}}) == (options, [])


def test_environment_variables_are_never_applied_even_on_trust() -> None:
    kept, dropped = screen("ort-cpu", {"options": {}, "env": {"LD_PRELOAD": "/tmp/x.so"}}, trust=True)
    assert kept == {} and dropped and "environment" in dropped[0]
    assert "LD_PRELOAD" not in os.environ
