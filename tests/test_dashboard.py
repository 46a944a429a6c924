"""``compstack report --sweep``: the cross-stack dashboard.

Sweeps of 60 models x 7 targets (420 rows) are written into a temporary results database
through :class:`compstack.core.results.ResultsDB` (the rows a sweep writes: statuses at
their stages, latencies, compile times, versions); the figures on the page are checked
against the ones computed here from the generated rows, the page size against 2 MB, and
the page in headless Chromium as ``tests/test_report_html.py`` does. Fields that newer
rows carry (``fault``, ``peak_rss_*_mb``, ``bundle``) are added as columns when this
compstack's rows lack them, as the results DB's AddColumn migrations will.
"""

from __future__ import annotations

import math
import random
import re
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

import pytest

from conftest import run_cli, said
from test_report_html import _browser_missing  # the report test's own check: one place

TARGETS = ["ort-cpu", "tvm-llvm", "iree-llvm-cpu", "xla-cpu", "inductor-cpu", "openvino-cpu", "torchscript-cpu"]
MODELS = [f"zoo:real{i:02d}" for i in range(60)]
STATUSES = ["ok"] * 10 + ["imprecise", "mismatch", "failed", "crashed", "timeout", "unsupported", "oom"]
STAGE = {"mismatch": "compare", "failed": "lower", "crashed": "run", "timeout": "compile", "unsupported": "import",
         "oom": "compile"}
EXTRA = (("fault", "TEXT DEFAULT ''"), ("fault_reason", "TEXT DEFAULT ''"), ("peak_rss_compile_mb", "REAL"),
         ("peak_rss_run_mb", "REAL"), ("bundle", "TEXT DEFAULT ''"))


def _sweep(db_path: Path, seed: int, targets: list[str], started: float) -> dict:
    """One stored sweep of MODELS x targets with seeded statuses; returns what was written."""
    from compstack.core.results import Report, Result, ResultsDB

    rng = random.Random(seed)
    db = ResultsDB(db_path)
    assert db.conn is not None
    db.conn.execute("PRAGMA synchronous=OFF")  # 420 commits: no fsync each (speed only; same rows)
    sweep_id = f"sweep{seed:04d}"
    db.sweep_status({"sweep_id": sweep_id, "started": started, "status": "running", "executor": "local",
                     "models_json": json_dumps(MODELS), "targets_json": json_dumps(targets), "baseline": "ort-cpu"})
    rows: dict[tuple[str, str], dict] = {}
    for i, model in enumerate(MODELS):
        report = Report(model={"name": model, "fingerprint": f"fp{i}"}, reference={"target": "reference"})
        for t in targets:
            status = "ok" if t.startswith("ort-cpu") and rng.random() < 0.9 else rng.choice(STATUSES)
            agree = status in ("ok", "imprecise")
            median = rng.uniform(0.5, 50.0) if agree else None
            half = median * rng.uniform(0.01, 0.2) if median else 0.0  # the median's 95 % interval
            lat = {"median": median, "p10": median * 0.9, "p90": median * 1.1, "runs": 5,
                   "ci95": [median - half, median + half]} if median else None
            comp = rng.uniform(0.2, 200.0) if status not in ("unsupported", "failed") else None
            res = Result(target=t, status=status, stage="" if agree else STAGE[status],
                         error="" if agree else f"{status} in {t} <b>&", compile_s=comp, latency_ms=lat,
                         versions={t.split("@")[0].split("-")[0]: t.split("@")[1] if "@" in t else "1.0"})
            db.add(report, res, sweep_id, {})
            rows[(model, t)] = {"status": status, "stage": res.stage, "median": median, "compile_s": comp,
                                "ci95": lat["ci95"] if lat else None,
                                "rss_c": rng.uniform(100, 4000), "rss_r": rng.uniform(100, 4000),
                                "fault": "" if agree else rng.choice(["stack", "compstack", "unknown"])}
    db.sweep_status({"sweep_id": sweep_id, "started": started, "ended": started + 60, "status": "done",
                     "executor": "local", "models_json": json_dumps(MODELS), "targets_json": json_dumps(targets),
                     "baseline": "ort-cpu"})
    db.close()
    conn = sqlite3.connect(db_path)
    have = {r[1] for r in conn.execute("PRAGMA table_info(results)")}
    for col, decl in EXTRA:
        if col not in have:
            conn.execute(f"ALTER TABLE results ADD COLUMN {col} {decl}")
    for (model, t), r in rows.items():
        bundle = f"/tmp/bundles/{model}-{t}" if r["fault"] == "stack" else ""
        conn.execute("UPDATE results SET fault = ?, peak_rss_compile_mb = ?, peak_rss_run_mb = ?, bundle = ? "
                     "WHERE sweep_id = ? AND model_name = ? AND target = ?",
                     (r["fault"], r["rss_c"], r["rss_r"], bundle, sweep_id, model, t))
    conn.commit()
    conn.close()
    return {"sweep_id": sweep_id, "rows": rows}


def json_dumps(v: object) -> str:
    import json

    return json.dumps(v)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("dash")
    db = tmp / "results.sqlite"
    now = time.time()
    old = _sweep(db, 1, ["ort-cpu@1.19.0", *TARGETS[1:]], now - 3600)
    new = _sweep(db, 2, ["ort-cpu@1.20.0", *TARGETS[1:]], now)
    return {"tmp": tmp, "db": db, "old": old, "new": new, "env": {"COMPSTACK_DB": str(db),
                                                                  "COMPSTACK_CACHE_DIR": str(tmp / "cache")}}


def _geomean(v: list[float]) -> float:
    return math.exp(sum(map(math.log, v)) / len(v))


def test_figures_are_the_rows(stored: dict) -> None:
    from compstack.report.dashboard import load_dashboard

    d = load_dashboard(stored["db"])
    rows = stored["new"]["rows"]
    base = "ort-cpu@1.20.0"
    assert d["sweep"]["sweep_id"] == stored["new"]["sweep_id"] and d["baseline"] == base
    assert len(d["models"]) == 60 and len(d["targets"]) == 7
    by = {s["target"]: s for s in d["stacks"]}
    for t in d["targets"]:
        agree = [m for m in MODELS if rows[(m, t)]["status"] in ("ok", "imprecise")]
        assert by[t]["agree"] == len(agree)
        assert by[t]["imprecise"] == sum(rows[(m, t)]["status"] == "imprecise" for m in MODELS)
        speed = [rows[(m, base)]["median"] / rows[(m, t)]["median"] for m in agree
                 if rows[(m, base)]["median"] is not None]
        if t != base and speed:
            assert by[t]["geomean_speedup"] == pytest.approx(_geomean(speed), rel=1e-9)
        comp = [rows[(m, t)]["compile_s"] for m in MODELS if rows[(m, t)]["compile_s"] is not None]
        assert by[t]["geomean_compile_s"] == pytest.approx(_geomean(comp), rel=1e-9)
        assert by[t]["peak_mb"] == pytest.approx(max(max(rows[(m, t)]["rss_c"], rows[(m, t)]["rss_r"])
                                                     for m in MODELS))
        failed = [rows[(m, t)]["stage"] for m in MODELS if m not in agree]
        assert by[t]["funnel"] == {s: failed.count(s) for s in set(failed)}
    # --baseline: another target's speed-ups
    d2 = load_dashboard(stored["db"], baseline="openvino-cpu")
    ov = {s["target"]: s for s in d2["stacks"]}["tvm-llvm"]
    assert d2["baseline"] == "openvino-cpu" and ov["geomean_speedup"] != by["tvm-llvm"]["geomean_speedup"]


def test_history_is_by_stack_version(stored: dict) -> None:
    from compstack.report.dashboard import load_dashboard

    d = load_dashboard(stored["db"])
    old, new = stored["old"]["rows"], stored["new"]["rows"]
    h = d["history"]
    assert [e["sweep_id"] for e in h["earlier"]] == [stored["old"]["sweep_id"]]
    ch = {c["new"]: c for c in h["changes"]}
    ort = ch["ort-cpu@1.20.0"]  # matched to the other release of the same stack
    assert ort["old"] == "ort-cpu@1.19.0" and (ort["old_version"], ort["new_version"]) == ("1.19.0", "1.20.0")
    for t, c in ch.items():
        o = "ort-cpu@1.19.0" if t.startswith("ort-cpu") else t
        flips = [m for m in MODELS if old[(m, o)]["status"] != new[(m, t)]["status"]]
        assert c["flips_total"] == len(flips)
        ratios = [new[(m, t)]["median"] / old[(m, o)]["median"] for m in MODELS
                  if old[(m, o)]["median"] is not None and new[(m, t)]["median"] is not None]
        assert c["timed"] == len(ratios)
        if ratios:
            assert c["geomean_ratio"] == pytest.approx(_geomean(ratios), rel=1e-9)
        # a regression: agreeing before, not now; or slower by more than 10 % with disjoint intervals
        broke = [m for m in flips if old[(m, o)]["status"] in ("ok", "imprecise")
                 and new[(m, t)]["status"] not in ("ok", "imprecise")]
        slower = [m for m in MODELS if old[(m, o)]["median"] is not None and new[(m, t)]["median"] is not None
                  and new[(m, t)]["median"] > 1.10 * old[(m, o)]["median"]
                  and new[(m, t)]["ci95"][0] > old[(m, o)]["ci95"][1]]
        assert c["regressions"] == len(broke) + len(slower)
        assert {r["model"] for r in c["ratios"] if r["regression"]} <= set(slower)
        assert all(r["judged"] == "regression: significant" for r in c["ratios"] if r["regression"])


def test_page_is_small_and_self_contained(stored: dict) -> None:
    out = stored["tmp"] / "dash.html"
    p = run_cli("report", "--sweep", "-o", str(out), env=stored["env"])
    assert p.returncode == 0, p.stderr
    assert stored["new"]["sweep_id"] in p.stdout and "60 models x 7 targets" in p.stdout
    page = out.read_text(encoding="utf-8")
    size = len(page.encode())
    print(f"dashboard page, 60 models x 7 targets: {size} bytes")
    assert size < 2_000_000
    assert not re.search(r"<script|<link|<img|<iframe|@import\s|url\(|src=|https?://", page)
    assert page.count('<td data-target=') == 420 and "<b>&" not in page  # error strings are escaped
    stack_faults = sum(r["fault"] == "stack" for r in stored["new"]["rows"].values())
    assert page.count('class="x bundle"') == stack_faults > 0
    assert 'id="history-sweeps"' in page and "ort-cpu@1.19.0 (1.19.0) → ort-cpu@1.20.0 (1.20.0)" in page
    from compstack.report.dashboard import load_dashboard

    listed = [r for c in load_dashboard(stored["db"])["history"]["changes"] for r in c["ratios"]]
    assert page.count('class="regression"') == sum(r["regression"] for r in listed) > 0  # marked rows


@pytest.mark.parametrize("case", ["baseline", "baseline-without-sweep", "no-sweep"])
def test_bad_input_is_one_line(stored: dict, tmp_path: Path, case: str) -> None:
    args = ["report", "--sweep", "--baseline", "tensorrt", "-o", str(tmp_path / "d.html")]
    env = dict(stored["env"])
    if case == "baseline-without-sweep":
        args.remove("--sweep")
    elif case == "no-sweep":
        args = ["report", "--sweep", "-o", str(tmp_path / "d.html")]
        env["COMPSTACK_DB"] = str(tmp_path / "empty.sqlite")
        from compstack.core.results import ResultsDB

        ResultsDB(tmp_path / "empty.sqlite").close()
    p = run_cli(*args, env=env)
    assert p.returncode == 2, p.stderr
    lines = said(p.stderr)
    assert len(lines) == 1 and lines[0].startswith("compstack: error: ")
    # without --sweep, a database whose newest run is a sweep reports that sweep (compstack
    # report's rule since #28), so --baseline is checked against its targets there too
    assert {"baseline": "--baseline tensorrt: not a target", "baseline-without-sweep": "--baseline tensorrt: not a",
            "no-sweep": "no sweep"}[case] in lines[0]
    assert not (tmp_path / "d.html").exists()


def test_absent_fields_on_todays_rows(tmp_path: Path) -> None:
    """Rows without fault/memory columns (one sweep, no history): the page says not recorded."""
    from compstack.core.results import Report, Result, ResultsDB
    from compstack.report.dashboard import load_dashboard, render_dashboard

    db = ResultsDB(tmp_path / "db.sqlite")
    db.sweep_status({"sweep_id": "s1", "started": time.time(), "status": "done", "executor": "local",
                     "models_json": json_dumps(["a", "b"]), "targets_json": json_dumps(["ort-cpu", "tvm-llvm"]),
                     "baseline": "ort-cpu"})
    rep = Report(model={"name": "a", "fingerprint": "fa"}, reference={"target": "reference"})
    db.add(rep, Result(target="ort-cpu", status="ok", latency_ms={"median": 2.0}), "s1")
    db.add(rep, Result(target="tvm-llvm", status="ok", latency_ms={"median": 1.0}), "s1")
    db.close()  # model b has no rows: missing
    d = load_dashboard(tmp_path / "db.sqlite")
    tvm = {s["target"]: s for s in d["stacks"]}["tvm-llvm"]
    assert tvm["geomean_speedup"] == 2.0 and tvm["agree"] == 1 and tvm["funnel"] == {"missing": 1}
    assert tvm["peak_mb"] is None and tvm["faults"] == {"not recorded": 1}
    page = render_dashboard(d)
    assert "not recorded" in page and 'id="history-none"' in page and 'data-status="missing"' in page


@pytest.mark.skipif(bool(_browser_missing()), reason=_browser_missing() or "browser present")
def test_dashboard_in_headless_chromium(stored: dict) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    from compstack.report.dashboard import write_dashboard

    page = stored["tmp"] / "browser.html"
    write_dashboard(stored["db"], page)
    profile = tempfile.mkdtemp(prefix="compstack-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={profile}", "--window-size=1400,2400"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    try:
        driver.get(page.as_uri())
        assert driver.find_element(By.ID, "title").text == f"sweep {stored['new']['sweep_id']}"
        stacks = driver.find_elements(By.CSS_SELECTOR, "#stacks tbody tr")
        assert [r.get_attribute("data-target") for r in stacks] == ["ort-cpu@1.20.0", *TARGETS[1:]]
        rows = stored["new"]["rows"]
        for r in stacks:  # the pass count shown is the rows'
            t = r.get_attribute("data-target")
            agree = sum(rows[(m, t)]["status"] in ("ok", "imprecise") for m in MODELS)
            assert f"{agree}/60" in r.text
        assert len(driver.find_elements(By.CSS_SELECTOR, "#models tbody tr")) == 60
        assert len(driver.find_elements(By.CSS_SELECTOR, "#models td[data-status]")) == 420
        assert len(driver.find_elements(By.CSS_SELECTOR, "section.change")) == 7
        bar = driver.find_element(By.CSS_SELECTOR, "#stacks tbody tr .bar").rect
        assert bar["width"] > 30 and bar["height"] > 5  # laid out: ort agrees on most models
        assert driver.execute_script("return performance.getEntriesByType('resource').length") == 0
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert errors == []
        shot = stored["tmp"] / "dashboard.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        print(f"screenshot: {shot}")
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
