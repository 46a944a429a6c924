"""A failing ``compstack lower`` says how far it got and how to reproduce the failure
(issue #13, item 17).

``compstack lower zoo:bert --target vulkan`` fails in IREE's SPIR-V code generation
("failed to legalize ... vector.insert_strided_slice ... vector<2xi64>": the generic Vulkan
target has no int64). The stage files written before the failure must be listed on the
console and in ``manifest.json``, with the failing stage, the stack's error, the
``iree-compile`` command that reproduces it (run here, from the files
``COMPSTACK_SAVE_TEMPS`` keeps) and the hint, which is checked to work.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from compstack import targets as registry
from conftest import run_cli


def test_failed_lower_lists_stages_failing_stage_command_and_hint(isolated_env: Path) -> None:
    if not registry.get("iree-vulkan").availability().ok:
        pytest.skip("IREE compiler unavailable here")
    out, temps = isolated_env / "out", isolated_env / "temps"
    proc = run_cli("lower", "zoo:bert", "--target", "vulkan", "-o", str(out),
                   env={"COMPSTACK_SAVE_TEMPS": str(temps)}, timeout=900)
    assert proc.returncode == 1, (proc.stdout, proc.stderr[-2000:])
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "vector<2xi64>" in manifest["error"] + manifest["log"], manifest
    written = [p.name.split("-", 1)[1].rsplit(".", 1)[0] for p in sorted((out / "stages").iterdir())]
    assert written and manifest["stages"] == written, (written, manifest["stages"])
    order = list(registry.get("iree-vulkan").stage_names)
    assert manifest["failed_stage"] == order[order.index(written[-1]) + 1]  # the next stage is the one that failed
    assert f"stages    {', '.join(written)}" in proc.stdout
    assert f"failed    at stage {manifest['failed_stage']}" in proc.stdout
    assert "gpu_target=" in manifest["hint"] and manifest["hint"] in proc.stdout
    argv = shlex.split(manifest["command"])
    assert Path(argv[0]).name == "iree-compile" and "--iree-hal-target-device=vulkan" in argv
    assert manifest["command"] in proc.stdout and manifest["temps"].startswith(str(temps))
    again = subprocess.run(argv, capture_output=True, text=True, timeout=600)  # the command reproduces it
    assert again.returncode != 0 and "vector.insert_strided_slice" in again.stderr, again.stderr[-2000:]
    option = manifest["hint"].split("--option ", 1)[1].split()[0]  # the hint works
    fixed = run_cli("lower", "zoo:bert", "--target", "vulkan", "--option", option, "-o", str(out), timeout=900)
    assert fixed.returncode == 0, (fixed.stdout, fixed.stderr[-2000:])
    done = json.loads((out / "manifest.json").read_text())
    assert done["status"] == "ok" and not done["failed_stage"] and "model.vmfb" in done["artifacts"]
    assert done["stages"][-1] == "vm" and "hint" not in fixed.stdout
