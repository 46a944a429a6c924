"""Every example in README.md and docs/**/*.md runs (issue #30 part 3), so the docs cannot drift
from the code.

Fenced ``bash``/``console`` blocks run their ``compstack ...`` lines (``$ `` prompts stripped, ``#``
comments dropped) through the real CLI, one block per subprocess, in a temporary folder with an
isolated cache and results database; every line must exit 0. ``python`` blocks run as a script
there. A block right after a line ``<!-- no-test -->`` is skipped (illustrative, needs files or a
network, or takes minutes); one after ``<!-- test: slow -->`` runs only with ``-m slow``. A runnable
shell block may hold only ``compstack`` lines: anything else must be marked. Identical blocks run
once. Default-tier blocks use toy zoo models, ``--no-latency`` and fast targets.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(bash|console|python)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
NO_TEST = "<!-- no-test -->"
SLOW = "<!-- test: slow -->"

_RUNNER = """
import json, sys
from compstack.cli import main
for argv in json.loads(sys.argv[1]):
    print("$ compstack " + " ".join(argv), flush=True)
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    if code != 0:
        print(f"exit status {code}", flush=True)
        sys.exit(code)
"""


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and its tier (default/slow/skip)."""

    where: str
    lang: str
    code: str
    tier: str


def pages() -> list[Path]:
    """README.md and every Markdown page of the docs site."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks() -> Iterator[Block]:
    """Every bash/console/python block of :func:`pages`, first occurrence of each text only."""
    seen: set[str] = set()
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
            tier = "skip" if before == NO_TEST else "slow" if before == SLOW else "default"
            line = text.count("\n", 0, m.start()) + 1
            if m.group(2) in seen:
                continue
            seen.add(m.group(2))
            yield Block(f"{page.relative_to(ROOT)}:{line}", m.group(1), m.group(2), tier)


def commands(block: Block) -> list[list[str]]:
    """The argv (after ``compstack``) of each command line of a shell block.

    Raises:
        AssertionError: a line that is not a ``compstack`` command (mark the block no-test).
    """
    out = []
    for raw in block.code.splitlines():
        line = raw[2:] if block.lang == "console" and raw.startswith("$ ") else raw
        if block.lang == "console" and not raw.startswith("$ "):
            continue  # console output
        argv = shlex.split(line, comments=True)
        if not argv:
            continue
        assert argv[0] == "compstack", f"{block.where}: {line!r} is not a compstack command; mark the block {NO_TEST}"
        out.append(argv[1:])
    return out


def _env(tmp: Path, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COMPSTACK_DB", "COMPSTACK_SAVE_TEMPS")}
    env.update(PYTHONPATH=str(ROOT), COMPSTACK_CACHE_DIR=str(cache), COMPSTACK_EXECUTOR="process",
               COMPSTACK_DAEMON_IDLE_S="0", HOME=str(tmp / "home"))
    return env


@pytest.fixture(scope="module")
def cache() -> Iterator[Path]:
    """One isolated store for the module's blocks (the zoo's toy models are exported once)."""
    with tempfile.TemporaryDirectory(prefix="cs-docs-cache-") as d:
        yield Path(d)


def run_block(block: Block, tmp: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    """Run one block in ``tmp``; the completed process (stdout and stderr together)."""
    (tmp / "home").mkdir(exist_ok=True)
    if block.lang == "python":
        script = tmp / "example.py"
        script.write_text(block.code, encoding="utf-8")
        argv = [sys.executable, str(script)]
    else:
        argv = [sys.executable, "-P", "-c", _RUNNER, json.dumps(commands(block))]
    return subprocess.run(argv, cwd=tmp, env=_env(tmp, cache), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=900)


ALL = list(blocks())


def _params(tier: str) -> list[object]:
    marks = [pytest.mark.slow] if tier == "slow" else []
    return [pytest.param(b, id=b.where, marks=marks) for b in ALL if b.tier == tier]


def test_blocks_are_found_and_marked() -> None:
    tiers = {t: sum(b.tier == t for b in ALL) for t in ("default", "slow", "skip")}
    assert tiers["default"] >= 1 and tiers["slow"] >= 5 and tiers["skip"] >= 10, tiers
    for b in ALL:
        if b.lang != "python" and b.tier != "skip":
            assert commands(b), f"{b.where}: a runnable shell block with no compstack command"


@pytest.mark.parametrize("block", _params("default") + _params("slow"))
def test_example_runs(block: Block, tmp_path: Path, cache: Path) -> None:
    proc = run_block(block, tmp_path, cache)
    assert proc.returncode == 0, f"{block.where} exited {proc.returncode}:\n{proc.stdout[-3000:]}"
    assert "Traceback (most recent call last)" not in proc.stdout, proc.stdout[-3000:]
    if block.lang != "python":
        assert proc.stdout.count("$ compstack ") == len(commands(block)), proc.stdout[-3000:]
