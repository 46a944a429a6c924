"""Run the `slow` tests and record that they ran; or check that every slow test has a record.

The default test run (CI's) leaves the tests marked ``slow`` out (pyproject addopts
``-m 'not slow'``): real-size models and release environments built from the registry take
minutes each. So that they still run somewhere, a developer runs them before resolving an
issue::

    python3 scripts/run_slow.py            # runs `pytest -m slow`, writes tests/slow_record.json
    python3 scripts/run_slow.py -k versions  # a subset; the other entries are kept

and CI checks, without running them, that every slow test it collects has an entry::

    python3 scripts/run_slow.py --check     # exit 1 naming each slow test never run

The record is JSON: ``{node id: {"outcome", "seconds", "commit", "date"}}``, read from the
JUnit XML file pytest writes (``--junitxml``). A test that failed is recorded as failed and
printed by ``--check`` (it ran; its failure is the developer's to report), a missing one
fails the check.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET  # noqa: S405 - parses the JUnit file pytest just wrote
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "tests" / "slow_record.json"


def collected() -> list[str]:
    """Node ids of every test marked slow, as pytest collects them (nothing run)."""
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "slow", "--collect-only", "-p", "no:cacheprovider", "-p", "no:xdist"],
                         cwd=ROOT, capture_output=True, text=True)
    if out.returncode not in (0, 5):
        sys.stderr.write(out.stdout[-4000:] + out.stderr[-4000:])
        raise SystemExit(f"run_slow: collecting the slow tests failed (exit {out.returncode})")
    return [line.strip() for line in out.stdout.splitlines() if "::" in line and not line.startswith(" ")]


def _node_id(case: ET.Element) -> str:
    """The pytest node id of a JUnit testcase (classname ``tests.test_x`` + name)."""
    cls, name = case.get("classname", ""), case.get("name", "")
    parts = cls.split(".")
    mod = [p for p in parts if p.startswith("test_")]
    path = "/".join(parts[: parts.index(mod[0]) + 1]) + ".py" if mod else cls.replace(".", "/") + ".py"
    rest = parts[parts.index(mod[0]) + 1:] if mod else []
    return "::".join([path, *rest, name])


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def run(extra: list[str]) -> int:
    """Run the slow tests (plus ``extra`` pytest arguments) and merge their outcomes into the record."""
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "slow.xml"
        code = subprocess.call([sys.executable, "-m", "pytest", "-q", "-ra", "-m", "slow", "-p", "no:xdist", f"--junitxml={junit}", *extra],
                               cwd=ROOT)
        if not junit.exists():
            return code or 1
        record = json.loads(RECORD.read_text()) if RECORD.exists() else {}
        now, commit = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d"), _commit()
        for case in ET.parse(junit).getroot().iter("testcase"):  # noqa: S314 - our own file
            outcome = "passed"
            for kind in ("failure", "error", "skipped"):
                if case.find(kind) is not None:
                    outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[kind]
            record[_node_id(case)] = {"outcome": outcome, "seconds": round(float(case.get("time", 0)), 1),
                                      "commit": commit, "date": now}
        RECORD.write_text(json.dumps(dict(sorted(record.items())), indent=1) + "\n")
        print(f"run_slow: recorded {len(record)} slow test(s) in {RECORD.relative_to(ROOT)}")
    return code


def check() -> int:
    """Exit 1 when a collected slow test has no record; print the recorded failures."""
    record = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    ids = collected()
    missing = [i for i in ids if i not in record]
    for i in ids:
        if i in record and record[i]["outcome"] != "passed":
            print(f"run_slow: {i} was {record[i]['outcome']} at {record[i]['commit']} ({record[i]['date']})")
    for i in missing:
        print(f"run_slow: {i} is marked slow and has never been run: python3 scripts/run_slow.py '{i}'")
    print(f"run_slow: {len(ids)} slow test(s), {len(ids) - len(missing)} recorded, {len(missing)} never run")
    return 1 if missing else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="check the record against the collected slow tests")
    args, extra = parser.parse_known_args()
    return check() if args.check else run(extra)


if __name__ == "__main__":
    sys.exit(main())
