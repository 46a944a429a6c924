#!/usr/bin/env python3
"""Size check: files and functions over a line budget, against a committed allowlist.

Budgets (lines as the file has them, blank lines and docstrings included, because that is
what a reader scrolls through):

* a module (``.py`` file under ``compstack/``) over ``FILE_BUDGET`` lines, and a stack's
  ``targets/<stack>/target.py`` over ``TARGET_FILE_BUDGET``;
* a function or method over ``FUNCTION_BUDGET`` lines, from its ``def`` (decorators
  included) to its last line (``ast`` ``end_lineno``); a nested function counts on its
  own and inside its parent.

``scripts/size_budget.txt`` lists today's over-budget items by name with their size
(``file PATH LINES`` / ``function PATH::QUALNAME LINES``). The check fails (exit 1) when
an item not listed goes over its budget, or a listed one grows past its recorded size;
it passes when items shrink or go (then ``--update`` rewrites the list smaller). It
prints every over-budget item either way. A file that does not parse is exit 2.

Usage: ``python3 scripts/size_check.py [--update] [--root DIR] [--budget FILE]``.
Standard library only (``ast``), so it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

#: Lines per module. 500: about what one reader holds as one subject, and few enough
#: items to list by name (2026-12-01: 12 of 182 modules over 500; 22 over 400, 45 over 300).
FILE_BUDGET = 500
#: Lines of a stack's ``targets/<stack>/target.py``: issue 12 part 2 sets ``<= 300`` (the
#: contract lives on the base classes; kernels and custom ops go in their own modules).
TARGET_FILE_BUDGET = 300
#: Lines per function. 80: one screen. Of 2238 functions the median is 8 lines and the 95th
#: percentile 35; 6 are over 80 (19 over 60, 3 over 100), the stage loops and converters.
FUNCTION_BUDGET = 80

HERE = Path(__file__).resolve().parent
DEFAULT_ROOT = HERE.parent
DEFAULT_BUDGET = HERE / "size_budget.txt"
PACKAGE = "compstack"


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, int]]:
    """``(qualified name, lines)`` of every function in ``tree``, nested ones included."""
    out: list[tuple[str, int]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                out.append((name, (node.end_lineno or node.lineno) - first + 1))
            out.extend(_functions(node, name + "."))
        else:
            out.extend(_functions(node, prefix))
    return out


def file_budget(rel: str) -> int:
    """The line budget of the module at ``rel`` (``compstack/...``, ``/``-separated)."""
    parts = rel.split("/")
    if len(parts) == 4 and parts[1] == "targets" and parts[3] == "target.py":
        return TARGET_FILE_BUDGET
    return FILE_BUDGET


def measure(root: Path) -> dict[str, int]:
    """Every over-budget item under ``root/compstack``: ``{"file PATH" | "function
    PATH::QUALNAME": lines}``, PATH relative to ``root`` with ``/``.

    Raises:
        SyntaxError: a module does not parse (the message names the file).
    """
    items: dict[str, int] = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        n = len(text.splitlines())
        if n > file_budget(rel):
            items[f"file {rel}"] = n
        tree = ast.parse(text, filename=rel)
        for qual, lines in _functions(tree):
            if lines > FUNCTION_BUDGET:
                key = f"function {rel}::{qual}"
                items[key] = max(lines, items.get(key, 0))  # a name defined twice: the larger
    return items


def read_budget(path: Path) -> dict[str, int]:
    """The allowlist: ``{item: lines}``; ``#`` comments and blank lines skipped.

    Raises:
        ValueError: a line that is not ``file|function NAME LINES`` (message names the line).
    """
    out: dict[str, int] = {}
    if not path.exists():
        return out
    for i, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 3 or parts[0] not in ("file", "function") or not parts[2].isdigit():
            raise ValueError(f"{path}:{i}: expected 'file PATH LINES' or 'function PATH::NAME LINES'")
        out[f"{parts[0]} {parts[1]}"] = int(parts[2])
    return out


def write_budget(path: Path, items: dict[str, int]) -> None:
    """Write ``items`` as the allowlist, sorted, with a header naming the budgets."""
    header = (f"# Over-budget items allowed today (scripts/size_check.py: files > {FILE_BUDGET} lines, "
              f"targets/<stack>/target.py > {TARGET_FILE_BUDGET}, functions > {FUNCTION_BUDGET} lines).")
    lines = [header,
             "# An item may shrink or go; it may not grow, and no new item may go over. Regenerate after",
             "# shrinking with: python3 scripts/size_check.py --update"]
    lines += [f"{k} {v}" for k, v in sorted(items.items())]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def compare(now: dict[str, int], allowed: dict[str, int]) -> list[str]:
    """The problems: items over budget that are not listed, and listed ones that grew."""
    problems = []
    for key, n in sorted(now.items()):
        if key not in allowed:
            problems.append(f"new over budget: {key} {n}")
        elif n > allowed[key]:
            problems.append(f"grew: {key} {allowed[key]} -> {n}")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Run the check; returns the exit status (0 clean, 1 over budget, 2 bad input)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="repository root (holds compstack/)")
    ap.add_argument("--budget", type=Path, default=None, help="allowlist (default: scripts/size_budget.txt)")
    ap.add_argument("--update", action="store_true", help="rewrite the allowlist to today's items")
    args = ap.parse_args(argv)
    budget = args.budget or (args.root / "scripts" / "size_budget.txt")
    if not (args.root / PACKAGE).is_dir():
        print(f"size_check: --root {args.root}: no {PACKAGE}/ folder", file=sys.stderr)
        return 2
    try:
        now = measure(args.root)
        allowed = read_budget(budget)
    except (SyntaxError, ValueError, UnicodeDecodeError) as exc:
        print(f"size_check: {exc}", file=sys.stderr)
        return 2
    if args.update:
        write_budget(budget, now)
        print(f"size_check: wrote {len(now)} items to {budget}")
        return 0
    files = sum(k.startswith("file ") for k in now)
    print(f"size_check: {files} files over budget ({FILE_BUDGET} lines; targets/<stack>/target.py "
          f"{TARGET_FILE_BUDGET}), {len(now) - files} functions over {FUNCTION_BUDGET} lines "
          f"(allowlist: {len(allowed)} items)")
    for key, n in sorted(now.items()):
        mark = "" if key in allowed and n <= allowed[key] else "  <-- over"
        print(f"  {key} {n}{mark}")
    shrunk = [k for k in allowed if k not in now or now[k] < allowed[k]]
    if shrunk:
        print(f"size_check: {len(shrunk)} listed items shrank or went; `--update` records that")
    problems = compare(now, allowed)
    for p in problems:
        print(f"size_check: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
