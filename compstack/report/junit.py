"""JUnit XML for CI systems (Jenkins, GitLab, GitHub test reporters): ``--junit FILE``.

``compare``: one ``<testsuite>`` per model (``name`` ``compstack compare <model>``), one
``<testcase>`` per target (``classname`` ``compstack.compare.<model>``, the model's name with
every character but letters, digits, ``_`` and ``-`` made ``_``; ``name`` the target; ``time``
the seconds this run spent on the row: compile (0 for an artifact from the cache) plus the
timed runs, ``mean x runs``).
``conformance``: one ``<testsuite>`` per target, one ``<testcase>`` per ONNX node test
(``classname`` ``compstack.conformance.<target>``).

Mapping, following the exit status of each command:

- ok / passed: a passing testcase;
- mismatch (compare) or a failing case not in the target's XFAIL file (conformance):
  ``<failure>``;
- failed, crashed, timeout, oom: ``<error>`` (compare); conformance reports every
  unexpected failure as ``<failure>``, its status in ``type``;
- unsupported, unavailable, reference-suspect, undefined (not judged: the oracle or the model
  is at fault), and conformance failures listed in the XFAIL file:
  ``<skipped>`` with the reason.

Every ``<failure>``/``<error>``/``<skipped>`` carries ``type`` = the status, ``message`` =
``"<stage>: <error>"``, and the full error as its text.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from compstack.core.errors import UserError

__all__ = ["compare_junit", "conformance_junit", "write_junit"]

_ERRORS = ("failed", "crashed", "timeout", "oom")
_SKIPPED = ("unsupported", "unavailable", "reference-suspect", "undefined")


def _clean(text: str) -> str:
    """Characters XML 1.0 cannot hold (control characters from a stack's log, U+FFFF in a
    model's output name) written as their escapes (:func:`compstack.core.sanitize.xml_text`)."""
    from compstack.core.sanitize import xml_text

    return xml_text(text)


def _outcome(case: ET.Element, kind: str, status: str, stage: str, error: str) -> None:
    first = error.splitlines()[0] if error else ""
    message = f"{stage}: {first}" if stage else first
    el = ET.SubElement(case, kind, {"type": status, "message": _clean(message[:500] or status)})
    el.text = _clean(f"status: {status}\nstage: {stage or '-'}\n{error}")


def _suite(parent: ET.Element, name: str, cases: list[ET.Element], props: dict[str, str], seconds: float,
           timestamp: str) -> None:
    counts = {k: sum(1 for c in cases if c.find(k) is not None) for k in ("failure", "error", "skipped")}
    suite = ET.SubElement(parent, "testsuite", {
        "name": name, "tests": str(len(cases)), "failures": str(counts["failure"]), "errors": str(counts["error"]),
        "skipped": str(counts["skipped"]), "time": f"{seconds:.3f}", "timestamp": timestamp})
    if props:
        pe = ET.SubElement(suite, "properties")
        for k, v in props.items():
            ET.SubElement(pe, "property", {"name": k, "value": _clean(str(v))})
    suite.extend(cases)


def _document(suites: Iterable[ET.Element]) -> ET.Element:
    root = ET.Element("testsuites", {"name": "compstack"})
    root.extend(suites)
    tot = {k: sum(int(s.get(k, "0")) for s in root) for k in ("tests", "failures", "errors", "skipped")}
    root.attrib.update({k: str(v) for k, v in tot.items()})
    root.set("time", f"{sum(float(s.get('time', '0')) for s in root):.3f}")
    return root


def _timestamp(t: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def compare_junit(report: Any) -> str:
    """The JUnit XML of a :class:`compstack.core.results.Report`."""
    model = re.sub(r"[^\w\-]", "_", report.model.get("name", "") or "model")  # dots would split the classname
    cases = []
    total = 0.0
    for r in report.results:
        lat = r.latency_ms or {}
        seconds = ((r.compile_s or 0.0) if not r.cached else 0.0) + (lat.get("mean") or 0.0) * (lat.get("runs") or 0) / 1e3
        total += seconds
        case = ET.Element("testcase", {"classname": f"compstack.compare.{model}", "name": r.target,
                                       "time": f"{seconds:.3f}"})
        if r.status == "mismatch":
            _outcome(case, "failure", r.status, r.stage, r.error)
        elif r.status in _ERRORS:
            _outcome(case, "error", r.status, r.stage, r.error)
        elif r.status in _SKIPPED:
            _outcome(case, "skipped", r.status, r.stage, r.error)
        lines = [f"compile_s: {r.compile_s}", f"latency_median_ms: {lat.get('median')}"]
        lines += [f"{o['name']}: max_abs_err {o['max_abs_err']} max_rel_err {o['max_rel_err']} ok {o['ok']}"
                  for o in r.outputs]
        ET.SubElement(case, "system-out").text = _clean("\n".join(lines + list(r.notes)))
        cases.append(case)
    root = ET.Element("testsuites")
    props = {"run_id": report.run_id, "fingerprint": report.model.get("fingerprint", ""),
             "reference": report.reference.get("target", "")}
    _suite(root, f"compstack compare {report.model.get('name') or 'model'}", cases, props, total,
           _timestamp(report.started))
    return _serialise(_document(list(root)))


def conformance_junit(report: Any) -> str:
    """The JUnit XML of a :class:`compstack.conformance.suite.SuiteReport`."""
    import time

    from compstack.conformance.suite import read_xfail

    suites = ET.Element("testsuites")
    for s in report.summaries:
        known = read_xfail(Path(s.xfail_file)) if s.xfail_file else {}
        cases = []
        for row in (r for r in report.rows if r["target"] == s.target):
            case = ET.Element("testcase", {"classname": f"compstack.conformance.{s.target}", "name": row["case"],
                                           "time": f"{row.get('seconds') or 0.0:.3f}"})
            status, stage, error = row["status"], row.get("stage") or "", row.get("error") or ""
            if status == "unsupported":
                _outcome(case, "skipped", status, stage, error)
            elif status != "passed" and row["case"] in known:
                _outcome(case, "skipped", status, stage, f"known failure ({s.xfail_file}): {error}")
            elif status != "passed":
                _outcome(case, "failure", status, stage, error)
            cases.append(case)
        if not s.available:
            case = ET.Element("testcase", {"classname": f"compstack.conformance.{s.target}", "name": "(target)",
                                           "time": "0.000"})
            _outcome(case, "skipped", "unavailable", "", s.reason)
            cases.append(case)
        props = {"run_id": report.run_id, "version": s.version, "xfail_file": s.xfail_file or "(none)"}
        _suite(suites, f"compstack.conformance.{s.target}", cases, props, s.seconds, _timestamp(time.time()))
    return _serialise(_document(list(suites)))


def _serialise(root: ET.Element) -> str:
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(path: Path, text: str) -> None:
    """Write ``text`` to ``path``.

    Raises:
        UserError: the file cannot be written.
    """
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--junit {path}: cannot write ({exc.strerror or exc})") from None
