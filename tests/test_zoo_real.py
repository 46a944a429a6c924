"""The real tier of the zoo: listed from metadata (no torch), every constructor builds at
its recorded size (on the meta device: no weights allocated), inputs as recorded; and a
few real models end to end under the ``slow`` marker."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys

import pytest

from compstack.core.errors import UserError
from compstack.frontends import zoo
from compstack.frontends.zoo import _real
from conftest import run_cli

REAL = zoo.names(tier="real")
FAMILIES = {"mlp", "cnn", "segmentation", "detection", "encoder", "decoder", "encoder-decoder", "vit", "audio",
            "diffusion", "clip", "recsys", "rnn"}


def test_listing_reads_metadata_only_and_imports_no_torch() -> None:
    code = ("import json, sys; from compstack.frontends import zoo; "
            "rows = [zoo.real_info(n) for n in zoo.names(tier='real')]; "
            "print(json.dumps({'rows': rows, 'heavy': sorted(m for m in ('torch', 'transformers', 'diffusers') "
            "if m in sys.modules) + sorted(m for m in sys.modules if m.split('.')[0] in ('timm', 'torchvision'))}))")
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert out["heavy"] == []
    rows = out["rows"]
    assert len(rows) >= 60 and len({r["name"] for r in rows}) == len(rows)
    assert {r["family"] for r in rows} == FAMILIES
    for r in rows:
        assert r["tier"] == "real" and r["params"] > 1_000_000, r["name"]
        assert r["source"]["library"] in ("transformers", "diffusers", "timm", "torch") and r["source"]["version"]
        assert r["inputs"] and all(i["shape"][0] >= 1 for i in r["inputs"]) and r["settings"]["batch"] >= 1
    opsets = {r["name"]: r["opset"] for r in rows if r["name"].startswith("zoo:resnet50")}
    assert opsets == {"zoo:resnet50": 20, "zoo:resnet50-opset18": 18, "zoo:resnet50-opset23": 23}


def test_cli_lists_tiers() -> None:
    from click.testing import CliRunner

    from compstack.cli.zoo import zoo as zoo_cmd

    proc = CliRunner().invoke(zoo_cmd, ["--tier", "real", "--json"])
    assert proc.exit_code == 0, proc.output
    rows = json.loads(proc.output)
    assert [r["name"] for r in rows] == [f"zoo:{n}" for n in REAL]
    bert = next(r for r in rows if r["name"] == "zoo:bert-base")
    assert bert["params"] == 109_482_240 and bert["inputs"][0]["shape"] == [1, 128]  # bert-base-uncased: 110 M
    table = CliRunner().invoke(zoo_cmd, ["--tier", "real"], terminal_width=200)
    assert table.exit_code == 0 and "zoo:sd-unet" in table.output and "859.5" in table.output
    bad = CliRunner().invoke(zoo_cmd, ["--tier", "huge"])
    assert bad.exit_code == 2 and "huge" in bad.output


def test_tiers_keep_the_toy_default() -> None:
    assert zoo.names()[:2] == ["mlp", "cnn"] and not set(zoo.names()) & set(REAL)
    assert zoo.names(tier="all") == zoo.names() + REAL
    assert zoo.tier("zoo:resnet50") == "real" and zoo.tier("mlp") == "toy"
    with pytest.raises(UserError, match="unknown zoo tier 'big'"):
        zoo.names(tier="big")
    with pytest.raises(UserError, match="toy tier"):
        zoo.real_info("mlp")


@pytest.mark.parametrize("name", [n for n in REAL if "-opset" not in n])
def test_constructor_builds_at_recorded_size(name: str) -> None:
    pytest.importorskip("torch")
    from compstack.frontends.zoo._real_build import _wrapper, construct, count_params

    spec = _real.spec(name)
    if spec.library == "diffusers":
        pytest.importorskip("diffusers")
    model = construct(name, device="meta")
    assert count_params(model) == spec.params
    wrapper = _wrapper(tuple(i.name for i in spec.inputs))
    assert list(inspect.signature(wrapper.forward).parameters)[1:] == [i.name for i in spec.inputs]


def test_torchvision_layouts_have_torchvisions_published_parameter_counts() -> None:
    """SqueezeNet 1.1 and GoogLeNet are written out in compstack; their counts must be the
    ``num_params`` of torchvision's model docs (squeezenet1_1, googlenet), and they must
    map an image to 1000 logits."""
    torch = pytest.importorskip("torch")
    from compstack.frontends.zoo._real_build import construct, count_params

    published = {"squeezenet-1.1": 1_235_496, "googlenet": 6_624_904}
    for name, n in published.items():
        assert count_params(construct(name, device="meta")) == n, name
        model = construct(name)
        with torch.no_grad():
            out = model(torch.rand(1, 3, 224, 224))
        assert tuple(out.shape) == (1, 1000) and bool(torch.isfinite(out).all()), name
        assert float(out.std()) > 1e-3, name  # the init keeps a usable scale at the logits


def test_example_inputs_match_the_metadata() -> None:
    torch = pytest.importorskip("torch")
    from compstack.frontends.zoo._real_build import _inputs

    for name in REAL:
        spec = _real.spec(name)
        made = _inputs(spec, torch.Generator().manual_seed(0))
        assert list(made) == [i.name for i in spec.inputs], name
        for i in spec.inputs:
            t = made[i.name]
            assert tuple(t.shape) == i.shape and str(t.dtype) == f"torch.{i.dtype}", (name, i.name)
            assert i.low <= float(t.min()) and float(t.max()) < i.high, (name, i.name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18", "distilbert", "mobilenet-v2", "lstm-lm", "dlrm-small", "mobilenet-v3-small"])
def test_real_model_end_to_end(name: str, tmp_path) -> None:
    env = {"COMPSTACK_CACHE_DIR": str(tmp_path / "cache"), "COMPSTACK_DB": str(tmp_path / "db.sqlite")}
    proc = run_cli("compare", f"zoo:{name}", "--targets", "ort-cpu,openvino-cpu", "--no-latency", "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    assert data["model"]["nodes"] > 10 and data["model"]["params"] >= _real.spec(name).params * 0.99
    for row in data["results"]:
        assert row["status"] == "ok", (row["target"], row["stage"], row["error"])
        assert row["compile_s"] > 0


def test_a_real_model_is_exported_in_a_worker(tmp_path) -> None:
    """A real-tier build and export runs in a worker process that writes the zoo cache; the
    caller reads the entry (torch never imported in it), and a second load is a cache hit."""
    code = ("import sys, time; from compstack.frontends import zoo; t = time.monotonic(); "
            f"s = zoo.load('lstm-lm', cache_dir={str(tmp_path)!r}); "
            "print(len(s.model.graph), 'torch' in sys.modules, s.native is None, sorted(s.example_inputs))")
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr[-2000:]
    nodes, torch_here, no_native, inputs = first.stdout.split(maxsplit=3)
    assert int(nodes) > 5 and torch_here == "False" and no_native == "True"
    assert inputs.strip() == str(sorted(i.name for i in _real.spec("lstm-lm").inputs))
    assert len(list((tmp_path / "zoo").glob("lstm-lm-*"))) == 1
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and again.stdout == first.stdout, again.stderr[-2000:]


def test_the_export_workers_error_is_one_export_error(tmp_path) -> None:
    """What the export worker raises comes back as one ExportError line with its stage (here
    the worker's zoo lookup refuses the name), not a traceback or a silent empty cache."""
    from compstack.core.errors import ExportError
    from compstack.frontends.zoo._isolated import export_zoo_isolated

    with pytest.raises(ExportError) as info:
        export_zoo_isolated("no-such-model", tmp_path)
    assert info.value.stage == "build" and "no-such-model" in str(info.value)
    assert len(str(info.value).splitlines()) == 1 and "Traceback" not in str(info.value)
    assert not (tmp_path / "zoo").exists() or not any((tmp_path / "zoo").iterdir())


def test_a_lost_export_worker_is_crashed_or_timeout_not_a_failed_builder(tmp_path, monkeypatch) -> None:
    """An export worker killed by the kernel's OOM killer (bert-large's, beside other sweeps'
    idle workers) made ``failed@build`` rows blamed on "the model's own builder raised". A
    lost worker is ``crashed`` (a signal) or ``timeout`` now, as a job's worker is, attributed
    to the machine; a resumed sweep exports the model again."""
    import signal
    import threading
    import time

    from compstack.analysis.fault import attribute
    from compstack.core.errors import ExportError
    from compstack.core.results import Result
    from compstack.frontends.zoo import _isolated

    with pytest.raises(ExportError) as info:
        _isolated.export_zoo_isolated("lstm-lm", tmp_path / "a", timeout_s=0.5)
    assert info.value.status == "timeout" and info.value.stage == "build"
    caught: list[BaseException] = []

    def export() -> None:
        try:
            _isolated.export_zoo_isolated("lstm-lm", tmp_path / "b")
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            caught.append(exc)

    t = threading.Thread(target=export)
    t.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not caught:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
        mine = [int(p) for p in pids if _cmdline(p).count(str(tmp_path / "b"))]
        if mine:
            os.kill(mine[0], signal.SIGKILL)  # what the OOM killer sends
            break
        time.sleep(0.05)
    t.join(120)
    assert caught and isinstance(caught[0], ExportError), caught
    exc = caught[0]
    assert exc.status == "crashed" and "SIGKILL (possibly the kernel's OOM killer)" in str(exc)
    fault = attribute(Result(target="ort-cpu", status=exc.status, stage=exc.stage, error=str(exc)))
    assert fault.fault == "unknown" and "export worker was lost" in fault.reason
    # in a sweep: rows of that status (not failed), and --resume does not keep them
    from compstack.core.config import settings
    from compstack.run.runner import Limits
    from compstack.run.session import CompareOptions
    from compstack.sweep import LocalExecutor, SweepOptions, run_sweep

    monkeypatch.setattr(_isolated.export_zoo_isolated, "__defaults__", (0.5, False))
    cfg = settings(cache_dir=tmp_path / "cache", db=tmp_path / "r.sqlite")
    opts = CompareOptions(targets=["ort-cpu"], latency=None, limits=Limits(timeout_s=60))
    first = run_sweep(SweepOptions(["zoo:lstm-lm"], opts, "ort-cpu"), cfg, LocalExecutor(1))
    row = first.rows[("zoo:lstm-lm", "ort-cpu")]
    assert (row.status, row.stage, row.fault) == ("timeout", "build", "unknown"), row
    again = run_sweep(SweepOptions(["zoo:lstm-lm"], opts, "ort-cpu", resume=True), cfg, LocalExecutor(1))
    assert again.resumed == 0 and again.rows[("zoo:lstm-lm", "ort-cpu")].status == "timeout"


def _cmdline(pid: str) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
    except OSError:
        return ""


def test_an_export_failure_is_a_row_per_target(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    import sqlite3

    from compstack.core.config import settings
    from compstack.core.errors import ExportError
    from compstack.frontends.from_torch import import_torch
    from compstack.run.export_rows import export_failed

    class DataDependent(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[x > 0] if bool((x > 0).sum() > 2) else x  # a branch on the data

    with pytest.raises(ExportError) as info:
        import_torch(DataDependent(), {"x": torch.randn(4)}, name="dd")
    assert info.value.stage == "torch.export" and str(info.value).startswith("dd: torch.export failed: ")
    cfg = settings(cache_dir=tmp_path / "cache", db=tmp_path / "db.sqlite")
    seen: list[str] = []
    report = export_failed("dd.py:build", info.value, ["ort-cpu", "tvm-llvm"], cfg,
                           on_result=lambda r: seen.append(r.target))
    assert seen == ["ort-cpu", "tvm-llvm"]
    assert [(r.status, r.stage) for r in report.results] == [("failed", "torch.export")] * 2
    assert report.model["export_stage"] == "torch.export"
    with sqlite3.connect(tmp_path / "db.sqlite") as conn:
        rows = conn.execute("SELECT target, status, stage, error, fault, fault_reason FROM results ORDER BY target"
                            ).fetchall()
    assert [r[:3] for r in rows] == [("ort-cpu", "failed", "torch.export"), ("tvm-llvm", "failed", "torch.export")]
    assert rows[0][3] == str(info.value)
    # no stack ran: the export is compstack's (issue #23: every non-ok row says whose fault it is)
    assert {r[4] for r in rows} == {"compstack"} and rows[0][5].startswith("compstack's export of the model failed")


def test_timm_imports_without_torchvision_and_leaves_none_behind() -> None:
    # timm is installed --no-deps (its torchvision would replace the CPU torch); its import
    # gets placeholder torchvision modules that raise when used, and nothing outside timm
    # finds a torchvision afterwards.
    code = ("import importlib.util, json, sys\n"
            "from compstack.frontends.zoo._timm import import_timm\n"
            "timm = import_timm()\n"
            "from timm.layers import create_norm\n"
            "try:\n    create_norm.FrozenBatchNorm2d(3); used = 'ran'\n"
            "except ImportError as e:\n    used = str(e)\n"
            "print(json.dumps({'left': sorted(m for m in sys.modules if m.startswith('torchvision')),\n"
            "    'spec': importlib.util.find_spec('torchvision') is not None, 'used': used,\n"
            "    'meta': [type(f).__name__ for f in sys.meta_path]}))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    real_tv = subprocess.run([sys.executable, "-c", "import torchvision"], capture_output=True).returncode == 0
    if not real_tv:
        assert out["left"] == [] and not out["spec"] and "_Finder" not in out["meta"]
        assert "torchvision is not importable here" in out["used"]


def test_a_timm_entry_is_timms_model() -> None:
    torch = pytest.importorskip("torch")
    from compstack.frontends.zoo._real_build import build

    built = build("mobilenet-v3-small")
    assert type(built.module.model).__module__ == "timm.models.mobilenetv3"
    with torch.no_grad():
        out = built.module(**built.inputs)
    assert tuple(out.shape) == (1, 1000) and bool(torch.isfinite(out).all()) and float(out.std()) > 1e-3


def test_an_unexpected_error_in_the_export_worker_is_staged_by_whose_code_raised() -> None:
    """sd-unet's export worker died on protobuf's 2 GiB limit inside compstack's own
    canonicalization and the row said 'the model's own builder raised' (fault unknown):
    an exception raised in compstack's code is stage ``import`` (fault compstack); one raised
    in a library's code stays ``build``."""
    import json as _json

    from compstack.frontends.zoo._isolated import _unexpected

    try:
        _json.loads("{")
    except ValueError as exc:
        assert _unexpected("zoo:x", exc)["stage"] == "build"
    try:
        from compstack.core.sizes import parse_size

        parse_size("not a size")
    except Exception as exc:  # noqa: BLE001
        got = _unexpected("zoo:x", exc)
        assert got["stage"] == "import" and "core/sizes.py" in got["error"], got
