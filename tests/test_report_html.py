"""``compstack report``: a real comparison (ORT and TVM on the test MLP, TensorRT as the
row that cannot run) and a real conformance run go into a temporary results database;
the page is rendered from it and checked in text, and in headless Chromium through
Selenium: sections and plots present with one mark per target/output, no console error,
nothing fetched, a screenshot saved (``$COMPSTACK_ARTIFACTS`` or the test's temp folder).

Chromium comes from Debian (``apt-get install chromium chromium-driver``); the browser
test skips with the reason when it or the ``selenium`` package is missing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import make_mlp, run_cli, said

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FAST = ("--min-runs", "5", "--min-time", "0.05", "--warmup", "1")
TARGETS = "ort-cpu,tvm-llvm,tensorrt"
CASES = "^test_(relu|abs|mish|resize_upsample_scales_cubic)$"


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A database with two comparisons (default tolerances; atol=rtol=0) and a conformance run."""
    tmp = tmp_path_factory.mktemp("report")
    env = {"COMPSTACK_CACHE_DIR": str(tmp / "cache"), "COMPSTACK_DB": str(tmp / "results.sqlite")}
    model = make_mlp(tmp / "mlp.onnx")
    ok = run_cli("compare", str(model), "--targets", TARGETS, *FAST, "--json", env=env)
    assert ok.returncode == 0, ok.stderr[-2000:]
    tight = run_cli("compare", str(model), "--targets", "ort-cpu", *FAST, "--atol", "0", "--rtol", "0", "--json",
                    env=env)
    assert tight.returncode == 1, tight.stderr[-2000:]
    conf = run_cli("conformance", "--targets", "ort-cpu,tvm-llvm", "--filter", CASES, "--workers", "1", env=env)
    assert conf.returncode == 0, conf.stderr[-2000:] + conf.stdout[-2000:]
    return {"tmp": tmp, "env": env, "db": tmp / "results.sqlite", "ok": json.loads(ok.stdout),
            "tight": json.loads(tight.stdout)}


def _render(stored: dict, *args: str, name: str = "report.html") -> tuple[subprocess.CompletedProcess, str]:
    """``compstack report ARGS -o <tmp>/NAME``: the process and the page."""
    out = stored["tmp"] / name
    proc = run_cli("report", *args, "-o", str(out), env=stored["env"])
    assert proc.returncode == 0, proc.stderr
    return proc, out.read_text(encoding="utf-8")


def _svg(page: str, cls: str) -> str:
    m = re.search(rf'<svg class="plot {cls}".*?</svg>', page, re.S)
    assert m, f"no {cls} plot"
    return m.group(0)


def test_page_holds_the_run(stored: dict) -> None:
    run = stored["ok"]
    proc, page = _render(stored, "--run", run["run_id"])
    size = len(page.encode())
    print(f"page size: {size} bytes")
    assert f"run {run['run_id']}" in proc.stdout and "3 targets" in proc.stdout
    assert 4_000 < size < 200_000  # self-contained and small: inline CSS + SVG, no library inlined
    # self-contained: nothing to fetch, no script
    assert not re.search(r"<script|<link|<img|<iframe|@import\s|url\(|src=|https?://", page)
    by = {r["target"]: r for r in run["results"]}
    assert by["ort-cpu"]["status"] == by["tvm-llvm"]["status"] == "ok" and by["tensorrt"]["status"] == "unavailable"
    for target in by:
        assert f'data-target="{target}" data-status="{by[target]["status"]}"' in page
    # the table's latency median is the database's, formatted
    assert format(by["tvm-llvm"]["latency_ms"]["median"], ".4g") in page
    assert "TensorRT is not installed" in page  # the unavailable row's reason
    lat = _svg(page, "plot-latency")
    assert lat.count('class="median"') == 2 and lat.count('class="whisker"') == 2  # tensorrt has none
    comp = _svg(page, "plot-compile")
    assert comp.count('class="bar"') == 2
    abs_plot = _svg(page, "plot-abs-err")
    assert abs_plot.count('class="value-dot"') == 2 and abs_plot.count('data-ok="true"') == 2
    assert "onnxruntime " + by["ort-cpu"]["versions"]["onnxruntime"] in page
    assert "ORT_ENABLE_ALL" in page  # ort's flags
    assert 'id="conformance-table"' in page and "newest conformance run" in page
    assert "not stored in the results database" in page  # kernels/profile named as missing


def test_whiskers_bracket_the_median(stored: dict) -> None:
    _, page = _render(stored, "--run", stored["ok"]["run_id"])
    lat = _svg(page, "plot-latency")
    for g in re.findall(r'<g class="row".*?</g>', lat, re.S):
        x1, x2 = (float(v) for v in re.search(r'class="whisker" x1="([\d.]+)" y1="[\d.]+" x2="([\d.]+)"', g).groups())
        cx = float(re.search(r'class="median" cx="([\d.]+)"', g).group(1))
        assert x1 <= cx <= x2


def test_last_is_the_newest_and_mismatch_is_red(stored: dict) -> None:
    # the conformance run came last: --last renders it, with the matrix of cases TVM fails
    proc, page = _render(stored, "--last")
    assert "conformance run" in proc.stdout
    assert 'id="conformance-matrix"' in page and "test_mish" in page and "this run" in page
    assert 'id="target-table"' not in page
    proc, page = _render(stored, "--run", stored["tight"]["run_id"])
    abs_plot = _svg(page, "plot-abs-err")
    assert 'data-ok="false"' in abs_plot and 'data-ok="true"' not in abs_plot
    assert "outside tolerance rtol=0 atol=0" in page


def test_a_database_whose_path_has_a_question_mark_is_read(stored: dict, tmp_path: Path) -> None:
    """The read-only open built an SQLite URI from the raw path: 'a?b' opened another
    database ("no runs in this database yet")."""
    import shutil

    odd = tmp_path / "runs?2026#1" / "results.sqlite"
    odd.parent.mkdir()
    shutil.copy(stored["db"], odd)
    proc = run_cli("report", "--last", "-o", str(tmp_path / "r.html"), "--db", str(odd))
    assert proc.returncode == 0 and "conformance run" in proc.stdout, proc.stderr


@pytest.mark.parametrize("case", ["no-db", "empty-db", "not-sqlite", "unknown-run", "unwritable", "both"])
def test_bad_input_is_one_line(stored: dict, tmp_path: Path, case: str) -> None:
    db = stored["db"]
    out = tmp_path / "r.html"
    args = ["report", "-o", str(out)]
    if case == "no-db":
        db = tmp_path / "none.sqlite"
    elif case == "empty-db":
        db = tmp_path / "empty.sqlite"
        sqlite3.connect(db).close()
    elif case == "not-sqlite":
        db = tmp_path / "text.sqlite"
        db.write_text("not a database\n")
    elif case == "unknown-run":
        args += ["--run", "feedfacecafe"]
    elif case == "unwritable":
        (tmp_path / "file").write_text("")
        args[2] = str(tmp_path / "file" / "r.html")
    else:
        args += ["--last", "--run", stored["ok"]["run_id"]]
    proc = run_cli(*args, "--db", str(db))
    assert proc.returncode == 2, proc.stderr
    lines = said(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("compstack: error: "), proc.stderr
    expect = {"no-db": "no results database", "empty-db": "no runs in this database",
              "not-sqlite": "not a results database", "unknown-run": "feedfacecafe",
              "unwritable": "not writable", "both": "give one"}[case]
    assert expect in lines[0]
    assert not out.exists()


def test_sweep_says_none_yet(stored: dict) -> None:
    proc = run_cli("report", "--sweep", env=stored["env"])
    assert proc.returncode == 0 and proc.stdout.startswith("no sweeps in this database yet")


def test_import_compstack_loads_no_jinja() -> None:
    code = "import sys, compstack, compstack.cli, compstack.report; print('jinja2' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _browser_missing() -> str:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        return "chromium not installed (apt-get install -y chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium not installed (pip install selenium)"
    return ""


@pytest.mark.skipif(bool(_browser_missing()), reason=_browser_missing() or "browser present")
def test_page_in_headless_chromium(stored: dict) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    _render(stored, "--run", stored["ok"]["run_id"], name="browser.html")
    page = stored["tmp"] / "browser.html"
    profile = tempfile.mkdtemp(prefix="compstack-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={profile}", "--window-size=1280,2400"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    try:
        driver.get(page.as_uri())
        assert driver.find_element(By.ID, "title").text == "mlp.onnx"
        rows = driver.find_elements(By.CSS_SELECTOR, "#target-table tbody tr")
        assert [r.get_attribute("data-target") for r in rows] == ["ort-cpu", "tvm-llvm", "tensorrt"]
        assert len(driver.find_elements(By.CSS_SELECTOR, "svg.plot-latency circle.median")) == 2
        assert len(driver.find_elements(By.CSS_SELECTOR, "svg.plot-latency line.whisker")) == 2
        assert len(driver.find_elements(By.CSS_SELECTOR, "svg.plot-compile rect.bar")) == 2
        assert len(driver.find_elements(By.CSS_SELECTOR, "svg.plot-abs-err circle.value-dot")) == 2
        # the SVG was laid out: the plot has a real size on the page
        box = driver.find_element(By.CSS_SELECTOR, "svg.plot-latency").rect
        assert box["width"] > 500 and box["height"] > 50
        assert driver.find_elements(By.CSS_SELECTOR, "#conformance-table tbody tr")
        # nothing fetched: no resource besides the page itself
        assert driver.execute_script("return performance.getEntriesByType('resource').length") == 0
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert errors == []
        folder = Path(os.environ.get("COMPSTACK_ARTIFACTS", stored["tmp"]))
        folder.mkdir(parents=True, exist_ok=True)
        shot = folder / "report.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        print(f"screenshot: {shot}")
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def test_run_where_nothing_ran(tmp_path: Path) -> None:
    """A run whose only target could not run: the page says so in each section, no plot."""
    env = {"COMPSTACK_CACHE_DIR": str(tmp_path / "cache"), "COMPSTACK_DB": str(tmp_path / "db.sqlite")}
    proc = run_cli("compare", str(make_mlp(tmp_path / "mlp.onnx")), "--targets", "tensorrt", *FAST, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = run_cli("report", "-o", str(tmp_path / "r.html"), env=env)
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "r.html").read_text()
    assert "<svg" not in page and 'data-status="unavailable"' in page
    assert "no target has latency in this run" in page and "no target compiled in this run" in page
    assert "no conformance run in this database" in page


def test_interrupted_run_says_so(tmp_path: Path) -> None:
    from compstack.core.results import Report, Result, ResultsDB
    from compstack.report.html import load_run, render

    db = ResultsDB(tmp_path / "db.sqlite")
    report = Report(model={"name": "m", "fingerprint": "f"}, reference={"target": "reference"})
    db.run_status(report, "running")
    db.add(report, Result(target="ort-cpu", status="ok"))
    db.run_status(report, "interrupted")
    empty = Report(model={"name": "m2", "fingerprint": "g"}, reference={"target": "reference"}, started=report.started + 1)
    db.run_status(empty, "interrupted")  # stopped before its first row
    db.close()
    page = render(load_run(tmp_path / "db.sqlite", report.run_id))
    assert 'id="run-status"' in page and "this run was interrupted" in page
    assert load_run(tmp_path / "db.sqlite").run_id == empty.run_id  # the newest run, though it has no row
    assert "this run was interrupted" in render(load_run(tmp_path / "db.sqlite", empty.run_id))
