"""``compstack profile --trace FILE`` checked against the Trace Event Format itself: the
file is strict JSON and validates against ``trace_event_format.schema.json`` (a JSON
Schema written from the format's definition, with each phase's required fields and the
metadata events' argument shapes), and the schema is shown to reject what the format
forbids, so passing it means something. The layout (tracks, slices, args) is checked in
``test_exports.py``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from conftest import make_mlp, run_cli

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema not installed (pip install jsonschema)")

SCHEMA = json.loads((Path(__file__).parent / "trace_event_format.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def _strict(text: str) -> dict:
    """``json.loads`` that refuses ``NaN``/``Infinity`` (not JSON; Perfetto rejects them)."""
    def refuse(name: str) -> None:
        raise ValueError(f"non-JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def _errors(doc: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(doc)]


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("trace")
    out = tmp / "trace.json"
    proc = run_cli("profile", str(make_mlp(tmp / "mlp.onnx")), "--targets", "ort-cpu,tvm-llvm,tensorrt",
                   "--min-runs", "5", "--min-time", "0.05", "--warmup", "1", "--trace", str(out),
                   env={"COMPSTACK_CACHE_DIR": str(tmp / "cache"), "COMPSTACK_DB": str(tmp / "results.sqlite")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return _strict(out.read_text(encoding="utf-8"))


def test_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_trace_file_validates_against_the_trace_event_schema(trace: dict) -> None:
    assert _errors(trace) == []
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    kernels = [e for e in slices if e["cat"] == "kernel"]
    # two profiled targets, each with kernels and an end-to-end slice; tensorrt (absent) none
    assert {e["pid"] for e in kernels} == {1, 2} and sum(e["cat"] == "run" for e in slices) == 2
    assert all(e["dur"] > 0 for e in kernels)


@pytest.mark.parametrize("breaks", [
    "complete event without dur", "unknown phase", "timestamp as a string", "negative duration",
    "process_name without a name", "sort index not an integer", "unknown metadata event",
    "display unit not ms/ns", "no traceEvents", "pid as a string",
])
def test_schema_rejects_what_the_format_forbids(trace: dict, breaks: str) -> None:
    doc = copy.deepcopy(trace)
    events = doc["traceEvents"]
    x = next(e for e in events if e["ph"] == "X")
    name = next(e for e in events if e.get("name") == "process_name")
    sort = next(e for e in events if e.get("name") == "process_sort_index")
    if breaks == "complete event without dur":
        del x["dur"]
    elif breaks == "unknown phase":
        x["ph"] = "Z"
    elif breaks == "timestamp as a string":
        x["ts"] = str(x["ts"])
    elif breaks == "negative duration":
        x["dur"] = -1.0
    elif breaks == "process_name without a name":
        name["args"] = {"label": name["args"]["name"]}
    elif breaks == "sort index not an integer":
        sort["args"]["sort_index"] = "1"
    elif breaks == "unknown metadata event":
        name["name"] = "process_title"
    elif breaks == "display unit not ms/ns":
        doc["displayTimeUnit"] = "s"
    elif breaks == "no traceEvents":
        del doc["traceEvents"]
    elif breaks == "pid as a string":
        x["pid"] = str(x["pid"])
    assert _errors(doc), breaks
