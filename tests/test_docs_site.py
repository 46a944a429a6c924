"""The documentation site (issue #30 parts 1 and 5): it builds with ``mkdocs build --strict``, its
CLI reference lists every command and every flag of the real click tree, each stack page carries
the pass rate counted from its XFAIL file, and a few pages open in headless Chromium.

Skips with the reason when the ``docs`` extra (mkdocs) is not installed; the browser test also
when Debian's chromium/chromium-driver or selenium is missing (as tests/test_report_html.py).
"""

from __future__ import annotations

import html
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
STACK_PAGES = {"ort-cpu": "ort", "tvm-llvm": "tvm", "iree-llvm-cpu": "iree", "openvino-cpu": "openvino",
               "torchscript-cpu": "torchscript"}

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None,
                                reason='mkdocs not installed (pip install -e ".[docs]")')


def _hooks() -> object:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "_hooks" / "conformance.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def site() -> Iterator[Path]:
    """The site built in strict mode into a temporary folder (never into the checkout)."""
    out = Path(tempfile.mkdtemp(prefix="cs-site-"))
    try:
        proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
                              cwd=ROOT, capture_output=True, text=True, timeout=600,
                              env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1",
                                   "HOME": str(out)})
        assert proc.returncode == 0, proc.stderr[-3000:]
        yield out
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _commands() -> list[tuple[list[str], click.Command]]:
    from compstack.cli import cli

    ctx = click.Context(cli, info_name="compstack")
    out: list[tuple[list[str], click.Command]] = []

    def walk(cmd: click.Command, path: list[str]) -> None:
        if path:
            out.append((path, cmd))
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                walk(sub, [*path, name])

    walk(cli, [])
    return out


def _sections(page: str) -> dict[str, str]:
    """Heading id -> the HTML up to the next command heading, of the CLI reference page."""
    heads = list(re.finditer(r'<h\d id="(compstack[a-z0-9-]*)"', page))
    return {m.group(1): page[m.end():(heads[i + 1].start() if i + 1 < len(heads) else len(page))]
            for i, m in enumerate(heads)}


def test_cli_reference_lists_every_command_and_flag(site: Path) -> None:
    page = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    sections = _sections(page)
    commands = _commands()
    assert len(commands) >= 30
    for path, cmd in commands:
        anchor = "compstack-" + "-".join(path)
        assert anchor in sections, f"CLI reference has no section for compstack {' '.join(path)}"
        text = html.unescape(sections[anchor])
        for param in cmd.params:
            if isinstance(param, click.Option) and not param.hidden:
                for opt in param.opts + param.secondary_opts:
                    assert f"<code>{opt}</code>" in text, f"compstack {' '.join(path)}: {opt} missing from the reference"
        if cmd.help and not isinstance(cmd, click.Group):
            first = " ".join(cmd.help.split("\n\n")[0].split())
            assert first[:40] in " ".join(re.sub(r"<[^>]+>", "", text).split()), path
    assert "Sentinel.UNSET" not in page and "\b" not in page


def test_stack_pages_carry_the_xfail_pass_rate(site: Path) -> None:
    hooks = _hooks()
    total = hooks.NODE_TESTS[hooks.ONNX_RELEASE]  # type: ignore[attr-defined]
    for target, slug in STACK_PAGES.items():
        version, path, counts = hooks.xfail_counts(target)  # type: ignore[attr-defined]
        listed = sum(1 for ln in path.read_text().splitlines() if ln.split("#", 1)[0].strip())
        assert counts["total"] == listed == counts["unsupported"] + counts["failed"]
        text = re.sub(r"<[^>]+>", "", (site / "stacks" / f"{slug}.html").read_text(encoding="utf-8"))
        assert f"{total - listed} of {total} ONNX node tests" in text, target
        assert f"{target} {version}" in text and f"{counts['unsupported']} are unsupported" in text, target
    # the numbers the README once stated by hand, now counted from the files
    assert hooks.xfail_counts("torchscript-cpu")[2]["unsupported"] == 599  # type: ignore[attr-defined]


@pytest.mark.slow
def test_node_test_total_matches_the_installed_onnx() -> None:
    import onnx

    hooks = _hooks()
    release = ".".join(onnx.__version__.split(".")[:2])
    if release != hooks.ONNX_RELEASE:  # type: ignore[attr-defined]
        pytest.skip(f"the XFAIL files were recorded with onnx {hooks.ONNX_RELEASE}, this is {release}")  # type: ignore[attr-defined]
    from compstack.frontends.node_cases import _generate

    assert len(_generate()) == hooks.NODE_TESTS[release]  # type: ignore[attr-defined]


def _browser_missing() -> str:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        return "chromium not installed (apt-get install -y chromium chromium-driver)"
    if importlib.util.find_spec("selenium") is None:
        return "selenium not installed (pip install selenium)"
    return ""


@pytest.mark.skipif(bool(_browser_missing()), reason=_browser_missing() or "browser present")
def test_pages_in_headless_chromium(site: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    profile = tempfile.mkdtemp(prefix="compstack-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
                 "--window-size=1280,1600"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    try:
        driver.get((site / "index.html").as_uri())
        assert driver.find_element(By.TAG_NAME, "h1").text == "compstack"
        links = [a.get_attribute("href") for a in driver.find_elements(By.CSS_SELECTOR, "nav a[href]")]
        cli_link = [h for h in links if h and h.endswith("reference/cli.html")]
        assert cli_link and len(links) >= 40, links
        driver.get(cli_link[0])  # the nav's own link, as a reader would follow it
        heads = {h.get_attribute("id") for h in driver.find_elements(By.CSS_SELECTOR, "h3[id], h4[id]")}
        assert {"compstack-" + "-".join(p) for p, _ in _commands()} <= heads
        table = driver.find_element(By.XPATH, "//h3[@id='compstack-compare']/following::table[1]")
        assert table.rect["width"] > 300 and "--no-latency" in table.text  # laid out, not just present
        driver.get((site / "stacks" / "ort.html").as_uri())
        body = driver.find_element(By.TAG_NAME, "article").text
        assert "Conformance:" in body and "opt_level" in body
        driver.get((site / "getting-started.html").as_uri())
        code = [c.text for c in driver.find_elements(By.CSS_SELECTOR, "pre code")]
        assert any("compstack compare zoo:mlp" in c for c in code), code
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def test_api_reference_documents_every_public_name(site: Path) -> None:
    import compstack

    page = (site / "reference" / "api.html").read_text(encoding="utf-8")
    names = [n for n in compstack.__all__ if n not in ("__version__", "targets")]
    missing = [n for n in names if f'id="compstack.api.{n}"' not in page]
    assert not missing and len(names) >= 20, missing
    for fn in ("names", "get", "resolve", "register"):  # the registry, compstack.targets
        assert f'id="compstack.targets.{fn}"' in page, fn
