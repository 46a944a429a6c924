"""One flag spelling per idea (issue #28 part 4): ``--target``/``--targets`` everywhere, a
"did you mean" for an unknown target, the CLI's latency names in the API, a ModelProto."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import relu_proto, run_cli, said


def test_compare_takes_target_and_stages_takes_targets(mlp_onnx: Path, isolated_env: Path) -> None:
    proc = run_cli("compare", str(mlp_onnx), "--target", "ort-cpu", "--no-latency", "--json")
    assert proc.returncode == 0, proc.stderr
    assert [r["target"] for r in json.loads(proc.stdout)["results"]] == ["ort-cpu"]
    proc = run_cli("stages", "--targets", "ort-cpu")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "onnx"


def test_unknown_target_gets_did_you_mean_and_exit_2(mlp_onnx: Path, isolated_env: Path) -> None:
    proc = run_cli("compare", str(mlp_onnx), "--targets", "ort-cpu,tvm")
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert "\n" not in line and "unknown target 'tvm'; did you mean tvm-llvm, tvm-cuda, tvm-vulkan?" in line, line


@pytest.mark.parametrize("name, suggestion", [("ort-cpux", "ort-cpu"), ("torchscrpt-cpu", "torchscript-cpu"),
                                              ("iree", "iree-llvm-cpu"), ("cpus", "cpu"),
                                              ("ORT-CPU", "ort-cpu"), ("TVM", "tvm-llvm")])
def test_unknown_target_suggestions(name: str, suggestion: str) -> None:
    from compstack.core.errors import UserError
    from compstack.targets import resolve

    with pytest.raises(UserError, match=f"unknown target '{name}'; did you mean {suggestion}[,?]"):
        resolve(f"ort-cpu,{name}")


def test_unknown_target_message_without_a_close_name() -> None:
    from compstack.targets import unknown_target

    assert unknown_target("zzzz") == "unknown target 'zzzz' (run `compstack targets` to list them)"


def test_latency_config_takes_the_cli_names() -> None:
    import dataclasses

    from compstack.core.latency import LatencyConfig

    cfg = LatencyConfig(min_time=0.25, max_time=7)
    assert (cfg.min_time_s, cfg.max_time_s) == (0.25, 7.0)
    assert dataclasses.replace(cfg, warmup=1).min_time_s == 0.25  # replace keeps the value
    assert "min_time" not in dataclasses.asdict(cfg)
    assert LatencyConfig(min_time_s=0.5).min_time_s == 0.5
    with pytest.raises(TypeError, match="min_time=0.25 and min_time_s=0.5"):
        LatencyConfig(min_time=0.25, min_time_s=0.5)


def test_compare_accepts_a_model_proto(isolated_env: Path) -> None:
    import compstack
    from compstack.core.errors import UserError

    report = compstack.compare(relu_proto(), "reference", options=compstack.CompareOptions(targets=[], latency=None))
    assert report.model["name"] == "<ModelProto>" and report.model["nodes"] == 1
    assert [(r.target, r.status) for r in report.results] == [("reference", "ok")]
    with pytest.raises(UserError, match="not int"):
        compstack.compare(3, "reference")  # type: ignore[arg-type]


def test_target_flags_given_twice_add_up_or_are_refused(mlp_onnx: Path, isolated_env: Path) -> None:
    """--target and --targets given together add their targets (compare); a one-target
    command given two is refused in one line, never silently the last one (found by a new user)."""
    res = run_cli("compare", str(mlp_onnx), "--target", "ort-cpu", "--targets", "reference", "--no-latency", "--json")
    assert res.returncode == 0, res.stderr
    assert [r["target"] for r in json.loads(res.stdout)["results"]] == ["ort-cpu", "reference"]
    res = run_cli("run", str(mlp_onnx), "--target", "ort-cpu", "--target", "reference", "--no-latency")
    assert res.returncode == 2 and "--target given 2 times (ort-cpu, reference)" in res.stderr
    assert len(said(res.stderr)) == 1


@pytest.mark.parametrize("command", [("compare", "--targets", "ort-cpu"), ("run", "--target", "ort-cpu")])
def test_an_empty_model_is_refused_not_the_default(command: tuple[str, ...], isolated_env: Path) -> None:
    res = run_cli(command[0], "", *command[1:], "--no-latency")
    assert res.returncode == 2 and "MODEL '' is empty" in res.stderr, res.stderr


def test_an_error_naming_a_hostile_file_is_one_inert_line(tmp_path: Path, isolated_env: Path) -> None:
    bad = tmp_path / "evil $(id);name\nx\x1b[31m.onnx"
    bad.write_bytes(b"not an onnx file")
    res = run_cli("compare", str(bad), "--targets", "ort-cpu", "--no-latency")
    assert res.returncode == 2
    error = [ln for ln in res.stderr.splitlines() if ln.startswith("compstack: error:")]
    assert len(error) == 1 and "\x1b" not in res.stderr and "\\x1b" in error[0] and "\\x0a" in error[0], res.stderr


@pytest.mark.parametrize("value, says", [("99", "99 is not an ai.onnx opset this onnx"),
                                         ("abc", "'abc' is not an opset number (an integer from 1 to "),
                                         ("0", "0 is not an ai.onnx opset")])
def test_bad_opset_is_one_line_naming_the_flag(mlp_onnx: Path, isolated_env: Path, value: str, says: str) -> None:
    """An opset outside the installed onnx's range is refused before any stack runs (was the
    version converter's C++ assertion text), naming the flag, exit 2."""
    import onnx.defs

    proc = run_cli("compare", str(mlp_onnx), "--targets", "ort-cpu", "--opset", value, "--no-latency")
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "'--opset'" in line and says in line and f"to {onnx.defs.onnx_opset_version()}" in line, line
    assert "convert.h" not in line


def test_every_command_with_a_target_flag_takes_both_spellings() -> None:
    import click

    from compstack.cli import cli

    def walk(cmd: click.Command, path: str) -> list[tuple[str, click.Command]]:
        subs = cmd.commands.values() if isinstance(cmd, click.Group) else []
        return [(path, cmd)] + [w for c in subs for w in walk(c, f"{path} {c.name}")]

    missing = []
    for path, cmd in walk(cli, "compstack"):
        flags = {o for p in cmd.params if isinstance(p, click.Option) for o in p.opts}
        if flags & {"--target", "--targets"} and not {"--target", "--targets"} <= flags:
            missing.append(path)
    assert not missing, missing
