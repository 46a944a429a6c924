"""mkdocs hooks: each stack's ONNX conformance pass rate, written into its page at build time,
and click's ``\\b`` markers dropped from the generated CLI reference.

A page line ``<!-- conformance: TARGET -->`` becomes one sentence counted from the XFAIL file
``compstack/conformance/xfail/TARGET@VERSION.txt`` (one known failure a line, ``# why`` after
it: ``unsupported at STAGE`` or ``failed at STAGE``), so the number on the site is the file's.
The case total is the number of ONNX node tests of the onnx release the file was recorded
with (``NODE_TESTS``; ``tests/test_docs_site.py`` checks it against the installed onnx in its
slow tier). Reads text files only; imports nothing from the data.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

__all__ = ["NODE_TESTS", "XFAIL_DIR", "conformance_line", "on_page_content", "on_page_markdown", "xfail_counts"]

XFAIL_DIR = Path(__file__).resolve().parents[2] / "compstack" / "conformance" / "xfail"
#: ONNX node-test cases per onnx release (``onnx.backend.test.case.node.collect_testcases``,
#: kind ``node``): 1884 for onnx 1.23.
NODE_TESTS = {"1.23": 1884}
ONNX_RELEASE = "1.23"
_MARK = re.compile(r"^<!-- conformance: ([A-Za-z0-9_.-]+) -->$", re.MULTILINE)


def xfail_counts(target: str, xfail_dir: Path = XFAIL_DIR) -> tuple[str, Path, Counter[str]]:
    """The stack version, the XFAIL file and its failures by kind (``unsupported``, ``failed``).

    Args:
        target: a target name, e.g. ``ort-cpu``.
        xfail_dir: the folder of XFAIL files.

    Returns:
        ``(version, path, counts)``; ``counts["total"]`` is the number of listed cases.

    Raises:
        FileNotFoundError: no XFAIL file for ``target``.
    """
    files = sorted(xfail_dir.glob(f"{target}@*.txt"))
    if not files:
        raise FileNotFoundError(f"no XFAIL file for {target} in {xfail_dir}")
    path = files[-1]
    counts: Counter[str] = Counter()
    for line in path.read_text(encoding="utf-8").splitlines():
        case, _, why = line.partition("#")
        if not case.strip():
            continue
        counts["total"] += 1
        counts["unsupported" if why.strip().startswith("unsupported") else "failed"] += 1
    return path.stem.split("@", 1)[1], path, counts


def conformance_line(target: str) -> str:
    """One Markdown sentence: passed of total, percent, unsupported and failed counts."""
    version, path, counts = xfail_counts(target)
    total = NODE_TESTS[ONNX_RELEASE]
    passed = total - counts["total"]
    return (f"**Conformance:** {passed} of {total} ONNX node tests (onnx {ONNX_RELEASE}) pass with "
            f"{target} {version} ({100 * passed / total:.1f} %); {counts['unsupported']} are `unsupported` "
            f"and {counts['failed']} fail, as listed in `compstack/conformance/xfail/{path.name}` "
            f"(`compstack conformance --targets {target}` checks them).")


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """mkdocs event: replace every conformance marker of a page."""
    return _MARK.sub(lambda m: conformance_line(m.group(1)), markdown)


def on_page_content(html: str, **kwargs: Any) -> str:
    """mkdocs event: drop click's ``\\b`` (no-rewrap) markers that mkdocs-click copies from ``--help``,
    and show an option without a default as ``-`` (mkdocs-click 0.9 prints click 8.3's ``UNSET``)."""
    return html.replace("\b", "").replace("<td><code>Sentinel.UNSET</code></td>", "<td>-</td>")
