"""scripts/size_check.py: the repository passes its own allowlist, and the check fails
on a new over-budget item or a listed one that grew (a toy tree under tmp_path)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "size_check.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def _tree(tmp_path: Path, file_lines: int, func_lines: int) -> Path:
    """A toy repository: compstack/big.py of ``file_lines`` lines holding one function of
    ``func_lines`` lines, and compstack/targets/toy/target.py of 301 lines."""
    pkg = tmp_path / "compstack"
    (pkg / "targets" / "toy").mkdir(parents=True)
    body = ["def f():"] + ["    x = 1"] * (func_lines - 2) + ["    return x"]
    lines = body + [f"y{i} = {i}" for i in range(file_lines - len(body))]
    (pkg / "big.py").write_text("\n".join(lines) + "\n")
    (pkg / "targets" / "toy" / "target.py").write_text("z = 0\n" * 301)
    (tmp_path / "scripts").mkdir()
    return tmp_path


def test_repository_within_its_budget():
    p = _run()
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("size_check: ")
    listed = [ln for ln in (ROOT / "scripts" / "size_budget.txt").read_text().splitlines()
              if ln and not ln.startswith("#")]
    for ln in listed:  # every listed item is printed with its size now
        kind, name, _ = ln.split()
        assert f"  {kind} {name} " in p.stdout


def test_new_item_fails_then_listed_passes_then_growth_fails(tmp_path):
    root = _tree(tmp_path, file_lines=501, func_lines=81)
    p = _run("--root", str(root))
    assert p.returncode == 1
    assert "new over budget: file compstack/big.py 501" in p.stderr
    assert "new over budget: function compstack/big.py::f 81" in p.stderr
    assert "new over budget: file compstack/targets/toy/target.py 301" in p.stderr

    assert _run("--root", str(root), "--update").returncode == 0
    budget = (root / "scripts" / "size_budget.txt").read_text()
    assert "file compstack/big.py 501\n" in budget and "function compstack/big.py::f 81\n" in budget
    p = _run("--root", str(root))
    assert p.returncode == 0, p.stderr

    _tree(tmp_path / "x", file_lines=501, func_lines=82)  # the function grows by one line
    (root / "compstack" / "big.py").write_text((tmp_path / "x" / "compstack" / "big.py").read_text())
    p = _run("--root", str(root))
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == ["size_check: grew: function compstack/big.py::f 81 -> 82"]


def test_within_budget_and_bad_input(tmp_path):
    root = _tree(tmp_path, file_lines=500, func_lines=80)
    (root / "compstack" / "targets" / "toy" / "target.py").write_text("z = 0\n" * 300)
    p = _run("--root", str(root))
    assert p.returncode == 0 and "0 files over budget" in p.stdout and "0 functions over 80" in p.stdout

    (root / "scripts" / "size_budget.txt").write_text("file compstack/big.py many\n")
    p = _run("--root", str(root))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "size_budget.txt:1:" in p.stderr

    (root / "scripts" / "size_budget.txt").write_text("")
    (root / "compstack" / "bad.py").write_text("def (:\n")
    p = _run("--root", str(root))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "bad.py" in p.stderr
