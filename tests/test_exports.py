"""Exports other tools load: ``--junit`` (parsed back with ``junitparser``) on real
``compare`` and ``conformance`` runs, and ``profile --trace`` (Chrome trace-event JSON,
checked structurally as Perfetto's JSON importer reads it).

Perfetto's own trace processor (PyPI ``perfetto``) downloads its binary from
commondatastorage.googleapis.com on first use, which this offline machine cannot reach;
that check runs only when ``$PERFETTO_TRACE_PROCESSOR`` names a local
``trace_processor_shell`` binary.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from compstack import targets as registry
from compstack.core import ir as cir
from compstack.core.config import settings
from compstack.core.ir import SourceModel
from compstack.core.latency import LatencyConfig
from compstack.run.runner import Limits
from compstack.run.session import CompareOptions, compare
from conftest import make_mlp, run_cli

junitparser = pytest.importorskip("junitparser", reason="junitparser not installed (pip install junitparser)")

FAST = ("--min-runs", "5", "--min-time", "0.05", "--warmup", "1")

if "crash-segfault" not in registry.names():
    registry.register("crash-segfault", "crashy:SegfaultTarget")


def _env(tmp: Path) -> dict:
    return {"COMPSTACK_CACHE_DIR": str(tmp / "cache"), "COMPSTACK_DB": str(tmp / "results.sqlite")}


def _cases(path: Path) -> dict:
    """(classname, name) -> (result kind or 'pass', type, message) of a JUnit file."""
    xml = junitparser.JUnitXml.fromfile(str(path))
    out = {}
    for suite in xml:
        assert suite.tests == len(list(suite))
        for case in suite:
            res = case.result
            kind = type(res[0]).__name__.lower() if res else "pass"
            out[(case.classname, case.name)] = (kind, res[0].type if res else "", res[0].message if res else "")
    return out


def test_compare_junit(tmp_path: Path) -> None:
    model = make_mlp(tmp_path / "mlp.onnx")
    out = tmp_path / "compare.xml"
    proc = run_cli("compare", str(model), "--targets", "ort-cpu,tvm-llvm,tensorrt", *FAST, "--atol", "0",
                   "--rtol", "0", "--junit", str(out), "--json", env=_env(tmp_path))
    assert proc.returncode == 1, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    cases = _cases(out)
    cls = "compstack.compare.mlp_onnx"
    assert set(cases) == {(cls, "ort-cpu"), (cls, "tvm-llvm"), (cls, "tensorrt")}
    kind, typ, msg = cases[(cls, "ort-cpu")]
    assert (kind, typ) == ("failure", "mismatch") and msg.startswith("compare: y: wrong: outside tolerance rtol=0 atol=0")
    assert cases[(cls, "tensorrt")][:2] == ("skipped", "unavailable")
    assert cases[(cls, "tensorrt")][2].startswith("import: TensorRT is not installed")
    xml = junitparser.JUnitXml.fromfile(str(out))
    suite = next(iter(xml))
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (3, 2, 0, 1)
    assert suite.name == "compstack compare mlp.onnx" and suite.time > 0  # not a module path, not 0.000
    props = {p.name: p.value for p in suite.properties()}
    assert props["run_id"] == report["run_id"] and props["reference"] == "reference"


def test_compare_junit_crash_is_an_error(isolated_env: Path, mlp_onnx: Path) -> None:
    tmp_path = isolated_env
    from compstack.report.junit import compare_junit

    source = SourceModel(name="mlp", model=cir.load(mlp_onnx))
    opts = CompareOptions(targets=["crash-segfault", "ort-cpu"], latency=LatencyConfig(warmup=1, min_runs=3,
                          min_time_s=0.0), limits=Limits(timeout_s=60), cache=False)
    report = compare(source, opts, settings(cache_dir=tmp_path / "cache", db=tmp_path / "db.sqlite"))
    out = tmp_path / "crash.xml"
    out.write_text(compare_junit(report))
    cases = _cases(out)
    kind, typ, msg = cases[("compstack.compare.mlp", "crash-segfault")]
    assert (kind, typ) == ("error", "crashed") and msg.startswith("run: ") and "SIGSEGV" in msg
    assert cases[("compstack.compare.mlp", "ort-cpu")][0] == "pass"


def test_junit_unwritable_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    proc = run_cli("compare", "zoo:mlp", "--targets", "ort-cpu", "--junit", str(tmp_path / "file" / "x.xml"),
                   env=_env(tmp_path))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--junit" in proc.stderr, proc.stderr


def test_conformance_junit(tmp_path: Path) -> None:
    """One regression (removed from a copy of TVM's XFAIL file) is a failure; the other
    known failures are skipped; ORT's passes pass."""
    from compstack.conformance.suite import DEFAULT_XFAIL_DIR

    xfail = tmp_path / "xfail"
    shutil.copytree(DEFAULT_XFAIL_DIR, xfail)
    tvm = next(xfail.glob("tvm-llvm@*.txt"))
    lines = tvm.read_text().splitlines()
    tvm.write_text("\n".join(line for line in lines if not line.startswith("test_mish ")) + "\n")
    out = tmp_path / "conf.xml"
    proc = run_cli("conformance", "--targets", "ort-cpu,tvm-llvm", "--filter",
                   "^test_(relu|mish|resize_upsample_scales_cubic)$", "--workers", "1", "--xfail-dir", str(xfail),
                   "--junit", str(out), env=_env(tmp_path))
    assert proc.returncode == 1, proc.stderr[-2000:] + proc.stdout[-2000:]  # the regression
    cases = _cases(out)
    assert len(cases) == 6
    assert all(cases[("compstack.conformance.ort-cpu", c)][0] == "pass"
               for c in ("test_relu", "test_mish", "test_resize_upsample_scales_cubic"))
    kind, typ, msg = cases[("compstack.conformance.tvm-llvm", "test_mish")]
    assert (kind, typ) == ("failure", "failed") and msg.startswith("compare: ")
    kind, typ, msg = cases[("compstack.conformance.tvm-llvm", "test_resize_upsample_scales_cubic")]
    assert kind == "skipped" and msg.startswith("lower: known failure")
    assert cases[("compstack.conformance.tvm-llvm", "test_relu")][0] == "pass"


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("trace")
    model = make_mlp(tmp / "mlp.onnx")
    out = tmp / "trace.json"
    proc = run_cli("profile", str(model), "--targets", "ort-cpu,tvm-llvm,tensorrt", *FAST, "--trace", str(out),
                   "--json", env=_env(tmp))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {"doc": json.loads(out.read_text()), "profile": json.loads(proc.stdout), "path": out}


def test_trace_structure(trace: dict) -> None:
    doc, prof = trace["doc"], trace["profile"]
    assert prof["trace_file"] == str(trace["path"])
    events = doc["traceEvents"]
    assert doc["displayTimeUnit"] == "ms" and isinstance(events, list)
    for e in events:
        assert isinstance(e["name"], str) and e["ph"] in ("M", "X")
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "X":
            assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)) and e["dur"] >= 0
            assert isinstance(e["args"], dict)
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names[1] == "ort-cpu" and names[2] == "tvm-llvm" and names[3].startswith("tensorrt (no profile: ")
    threads = {(e["pid"], e["tid"]) for e in events if e["name"] == "thread_name"}
    slices = [e for e in events if e["ph"] == "X"]
    assert {(e["pid"], e["tid"]) for e in slices} <= threads  # every track is named
    assert not [e for e in slices if e["pid"] == 3]
    # non-overlapping slices per track
    tracks: dict = {}
    for e in slices:
        tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    for evs in tracks.values():
        evs.sort(key=lambda e: e["ts"])
        ns = [(round(e["ts"] * 1000), round(e["dur"] * 1000)) for e in evs]  # as Perfetto reads them: ns
        assert all(a_ts + a_dur <= b_ts for (a_ts, a_dur), (b_ts, _) in zip(ns, ns[1:]))
    # kernels: one slice per profiled kernel, in order, named by it, median in us, source nodes in args
    for pid, t in ((1, prof["targets"][0]), (2, prof["targets"][1])):
        kernels = [e for e in slices if e["pid"] == pid and e["cat"] == "kernel"]
        assert [e["name"] for e in kernels] == [k["id"] for k in t["profile"]["kernels"]]
        for e, k in zip(kernels, t["profile"]["kernels"]):
            assert e["dur"] == pytest.approx(k["median"] * 1000.0, abs=1e-3)
            mapped = next(m for m in t["kernels"]["kernels"] if m["id"] == k["id"])
            assert e["args"]["nodes"] == mapped["nodes"]
        assert {n for e in kernels for n in e["args"]["nodes"]} >= {"fc1", "fc2"}
        e2e = next(e for e in slices if e["pid"] == pid and e["cat"] == "run")
        assert e2e["dur"] == pytest.approx(t["profile"]["end_to_end_ms"]["median"] * 1000.0, abs=1e-3)


@pytest.mark.skipif(not os.environ.get("PERFETTO_TRACE_PROCESSOR"),
                    reason="Perfetto's trace processor downloads its binary on first use (no network here); set "
                           "PERFETTO_TRACE_PROCESSOR to a local trace_processor_shell")
def test_trace_loads_in_perfetto(trace: dict) -> None:
    tp_mod = pytest.importorskip("perfetto.trace_processor")
    config = tp_mod.TraceProcessorConfig(bin_path=os.environ["PERFETTO_TRACE_PROCESSOR"])
    tp = tp_mod.TraceProcessor(trace=str(trace["path"]), config=config)
    try:
        rows = list(tp.query("select count(*) as n from slice"))
        assert rows[0].n == sum(1 for e in trace["doc"]["traceEvents"] if e["ph"] == "X")
    finally:
        tp.close()
