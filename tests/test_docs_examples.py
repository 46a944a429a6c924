"""Every example in README.md and docs/**/*.md runs (issue #30 part 3), so the docs cannot drift
from the code.

Fenced ``bash``/``console`` blocks run their ``compstack ...`` lines (``$ `` prompts stripped, ``#``
comments dropped) through the real CLI, one block per subprocess, in a temporary folder with an
isolated cache and results database; every line must exit 0. ``python`` blocks run as a script
there, and so do ``python3 benchmarks/X.py`` and ``python3 scripts/X.py`` lines (the checkout's
scripts, run from that folder); a line whose comment says ``exit status N`` must end with N (``diff`` of two
different files, ``fuzz`` with a finding). The folder holds the files the examples name (``model.onnx``, ``inputs.npz``,
``my_model.py``...: :mod:`docs_workspace`). In a ``console`` block, a shown output line
``compstack: error: ...`` is checked: the command must print that line verbatim and exit 2;
other shown output (tables, timings) is not compared. A block right after a line
``<!-- no-test: REASON -->`` is skipped for the reason given (an install, a GPU, a cluster, an
hour-long run); one after ``<!-- test: slow -->`` runs only with ``-m slow``. A runnable shell
block may hold only ``compstack`` lines: anything else must be marked. Identical blocks run once.
Default-tier blocks use toy zoo models, ``--no-latency`` and fast targets.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(bash|console|python)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
NO_TEST = re.compile(r"^<!-- no-test: (\S.*\S) -->$")
SLOW = "<!-- test: slow -->"
_SCRIPT = re.compile(r"^(benchmarks|scripts)/[\w-]+\.py$")  # `python3 benchmarks/x.py ...` lines run too
_SAID = re.compile(r"\bexit status (\d)\b")  # in a line's comment: the status the example ends with

_RUNNER = """
import json, sys
from compstack.cli import main
import subprocess
root, todo = json.loads(sys.argv[1])
for script, argv, want in todo:
    print(f"$ {'python3 ' + script if script else 'compstack'} " + " ".join(argv), flush=True)
    if script:  # a script of the checkout (benchmarks/, scripts/), run from this folder
        code = subprocess.run([sys.executable, root + "/" + script, *argv]).returncode
    else:
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    sys.stdout.flush(); sys.stderr.flush()
    print(f"\\nexit status {code}", flush=True)  # on a line of its own, whatever the command left unended
    if code != want:
        sys.exit(code or 1)
"""


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and its tier (default/slow/skip)."""

    where: str
    lang: str
    code: str
    tier: str
    reason: str = ""  # why a no-test block is not run


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
            skip = NO_TEST.match(before)
            tier = "skip" if skip or before.startswith("<!-- no-test") else "slow" if before == SLOW else "default"
            line = text.count("\n", 0, m.start()) + 1
            if m.group(2) in seen:
                continue
            seen.add(m.group(2))
            yield Block(f"{page.relative_to(ROOT)}:{line}", m.group(1), m.group(2), tier,
                        skip.group(1) if skip else "")


@dataclass
class Command:
    """One command line of a shell block: its argv after ``compstack``, and the error lines a
    console block shows for it (expected verbatim, with exit status 2)."""

    argv: list[str]
    errors: list[str]
    said: int | None = None  # a line's comment "exit status N"
    script: str = ""  # "benchmarks/x.py" for a `python3 benchmarks/x.py ...` line

    @property
    def status(self) -> int:
        if self.said is not None:
            return self.said
        return 2 if self.errors else 0


def commands(block: Block) -> list[Command]:
    """The commands of a shell block, in order.

    Raises:
        AssertionError: a line that is not a ``compstack`` command (mark the block no-test).
    """
    out: list[Command] = []
    for raw in block.code.splitlines():
        if block.lang == "console" and not raw.startswith("$ "):
            if out and raw.startswith("compstack: error:"):
                out[-1].errors.append(raw.rstrip())
            continue  # other console output is illustrative
        line = raw[2:] if block.lang == "console" else raw
        argv = shlex.split(line, comments=True)
        if not argv:
            continue
        script = argv[1] if argv[0] == "python3" and len(argv) > 1 and _SCRIPT.match(argv[1]) else ""
        assert argv[0] == "compstack" or script, \
            f"{block.where}: {line!r} is neither a compstack command nor a script of the checkout; mark the block no-test"
        said = _SAID.search(line.split(" #", 1)[1]) if " #" in line else None
        out.append(Command(argv[2:] if script else argv[1:], [], int(said.group(1)) if said else None, script))
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


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files the examples name, written once (copied into each block's folder)."""
    import docs_workspace

    return docs_workspace.write(tmp_path_factory.mktemp("docs-workspace"))


@pytest.fixture(scope="module")
def bundle_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """:func:`workspace` with the real explain bundle ``bug/`` (slow blocks only)."""
    import docs_workspace

    return docs_workspace.write(tmp_path_factory.mktemp("docs-workspace-bug"), bundle=True)


def run_block(block: Block, tmp: Path, cache: Path, workspace: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run one block in ``tmp`` (a copy of ``workspace`` first); the completed process
    (stdout and stderr together)."""
    if workspace is not None:
        shutil.copytree(workspace, tmp, dirs_exist_ok=True)
    (tmp / "home").mkdir(exist_ok=True)
    if block.lang == "python":
        script = tmp / "example.py"
        script.write_text(block.code, encoding="utf-8")
        argv = [sys.executable, str(script)]
    else:
        argv = [sys.executable, "-P", "-c", _RUNNER, json.dumps([str(ROOT), [[c.script, c.argv, c.status] for c in commands(block)]])]
    return subprocess.run(argv, cwd=tmp, env=_env(tmp, cache), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=900)


ALL = list(blocks())


def _params(tier: str) -> list[object]:
    marks = [pytest.mark.slow] if tier == "slow" else []
    return [pytest.param(b, id=b.where, marks=marks) for b in ALL if b.tier == tier]


def test_blocks_are_found_and_marked() -> None:
    tiers = {t: sum(b.tier == t for b in ALL) for t in ("default", "slow", "skip")}
    assert tiers["default"] >= 10 and tiers["slow"] >= 10, tiers
    # most examples run; the rest (installs, clusters, hour-long runs) say why not
    assert tiers["skip"] * 5 <= len(ALL) * 2, tiers
    for b in ALL:
        if b.tier == "skip":
            assert b.reason, f"{b.where}: a no-test mark without a reason: <!-- no-test: WHY -->"
        elif b.lang != "python":
            assert commands(b), f"{b.where}: a runnable shell block with no compstack command"


def test_console_errors_are_read_as_expected_output() -> None:
    block = Block("x.md:1", "console", "$ compstack stages --target nope\ncompstack: error: unknown target\n"
                  "$ compstack targets\n┏━━ table\n$ compstack diff a b   # exit status 1: they differ\n", "default")
    cmds = commands(block)
    assert [c.argv for c in cmds] == [["stages", "--target", "nope"], ["targets"], ["diff", "a", "b"]]
    assert [c.errors for c in cmds] == [["compstack: error: unknown target"], [], []]
    assert [c.status for c in cmds] == [2, 0, 1]


@pytest.mark.parametrize("block", _params("default") + _params("slow"))
def test_example_runs(block: Block, tmp_path: Path, cache: Path, request: pytest.FixtureRequest) -> None:
    needs_bug = bool(re.search(r"(^|\s)bug/(\s|$)", block.code)) and "-o bug/" not in block.code
    proc = run_block(block, tmp_path, cache, request.getfixturevalue("bundle_workspace" if needs_bug else "workspace"))
    assert proc.returncode == 0, f"{block.where} exited {proc.returncode}:\n{proc.stdout[-3000:]}"
    assert "Traceback (most recent call last)" not in proc.stdout, proc.stdout[-3000:]
    if block.lang != "python":
        cmds = commands(block)
        assert len(re.findall(r"^\$ (compstack|python3) ", proc.stdout, re.M)) == len(cmds), proc.stdout[-3000:]
        assert [int(s) for s in re.findall(r"^exit status (-?\d+)$", proc.stdout, re.M)] == [c.status for c in cmds]
        lines = {ln.rstrip() for ln in proc.stdout.splitlines()}
        for c in cmds:
            for err in c.errors:
                assert err in lines, f"{block.where}: `compstack {shlex.join(c.argv)}` no longer says\n{err}\n" \
                                     f"it said:\n{proc.stdout[-3000:]}"
