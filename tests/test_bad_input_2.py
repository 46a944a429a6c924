"""Issue #27 classes 3, 4, 6, 7, 8: hostile strings are inert in every output kind, output
folders lose nothing compstack did not write, untrusted ``.npz`` members and external-data
locations are one line, exit codes on full outputs and on SIGINT, the journal quarantine.

The bad-input rows reuse :mod:`test_bad_input`'s table machinery (one subprocess per
row, one clear line, the right exit status, no traceback); ``python tests/test_bad_input_2.py``
runs them without pytest and prints the counts per class.
"""

from __future__ import annotations

import ast
import io
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
import unicodedata
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).parent))
from compstack.core import sanitize  # noqa: E402
from compstack.core.errors import UserError  # noqa: E402
from conftest import TESTS, make_mlp  # noqa: E402
from test_bad_input import Row, _ext_data, _file, run_row  # noqa: E402

# ---------------------------------------------------------------------------------------
# class 3: one table of hostile strings, through every output kind

HOSTILE = [
    "\x1b[31mred\x1b[0m", "\x1b]8;;http://evil.example/\x07link\x1b]8;;\x07", "\x1b]0;title\x07", "\x9b2J",
    "[/x]", "[link=http://evil.example]click[/link]", "[bold red]", "\\[/x]", "trailing\\",
    "\uffff", "\ufffe", "\ud800", "\\N", "\\N{", "\\x", '"""', "'''", "'\"", 'a"b\'c', "line\nbreak", "cr\rx",
    "nul\0byte", "\u202eevil\u202c", "\u2066iso\u2069", "zero\u200bwidth", "x" * 5000, "{}", "%s", "${HOME}",
    "../../etc/passwd", ".hidden", "", " ", "é漢\U0001f600", "\u2028sep",
]


def _inert_on_terminal(text: str) -> bool:
    return not any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Cn", "Zl", "Zp") for c in text)


@pytest.mark.parametrize("s", HOSTILE, ids=range(len(HOSTILE)))
def test_terminal_and_rich_are_inert(s: str) -> None:
    from rich.console import Console
    from rich.table import Table

    shown = sanitize.terminal(s, sanitize.MAX_SHOWN)
    assert _inert_on_terminal(shown) and len(shown) <= sanitize.MAX_SHOWN + 20
    buf = io.StringIO()
    con = Console(file=buf, force_terminal=False, color_system=None, width=400)
    table = Table("name")
    table.add_row(sanitize.rich_text(s, sanitize.MAX_SHOWN))
    con.print(table)
    con.print(f"[bold]{sanitize.rich_text(s, sanitize.MAX_SHOWN)}[/]")
    out = buf.getvalue()
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert shown in out.replace("\n", "") or len(shown) > 300  # the markup came out as written, not styled


@pytest.mark.parametrize("s", HOSTILE, ids=range(len(HOSTILE)))
def test_xml_html_python_sql_file_name(s: str) -> None:
    import html

    root = ET.Element("testsuite", {"name": sanitize.xml_text(s)})
    ET.SubElement(root, "system-out").text = sanitize.xml_text(s)
    text = ET.tostring(root, encoding="unicode")
    back = ET.fromstring(text.encode("utf-8"))  # expat: well-formed XML 1.0
    assert back.get("name") == sanitize.xml_text(s)

    h = sanitize.html_text(s)
    assert not set("<>\"'") & set(h) and html.unescape(h) == sanitize.xml_text(s)

    inner = sanitize.python_text(s)
    for quote in ('"', "'", '"""', "'''"):
        code = f"v = {quote}{inner}{quote}\n"
        tree = ast.parse(code)  # never a SyntaxError
        assert tree.body[0].value.value == s  # type: ignore[attr-defined]

    if "\0" in s:
        with pytest.raises(ValueError):
            sanitize.sql_ident(s)
    elif s and "\ud800" not in s:
        conn = sqlite3.connect(":memory:")
        conn.execute(f"CREATE TABLE t ({sanitize.sql_ident(s)} TEXT)")
        conn.execute(f"INSERT INTO t ({sanitize.sql_ident(s)}) VALUES (?)", (s,))
        assert [r[1] for r in conn.execute("PRAGMA table_info(t)")] == [s]

    name = sanitize.file_name(s, limit=40)
    assert name and name not in (".", "..") and not name.startswith(".") and len(name) <= 40
    assert all(c.isascii() and (c.isalnum() or c in "._-") for c in name)


def test_file_names_stay_distinct() -> None:
    names = [sanitize.file_name(s) for s in HOSTILE]
    assert len(set(names)) == len(HOSTILE)


def test_repro_scripts_stay_python() -> None:
    from compstack.explain.repro import _RUN, repro_script

    for stack in _RUN:
        for s in HOSTILE:
            script = repro_script(stack, {}, f"{s} disagrees with the ONNX reference", 1e-3, 1e-5)
            assert script is not None
            ast.parse(script)  # a SyntaxError here is the bug of the issue (op_type holding \N and quotes)


NAMES = ["\x1b[31mrelu\x1b[0m", "[/x]", "[link=http://evil.example]n[/link]", "o\uffff\"'\\N", "\u202eRTL", "n" * 3000]


def _hostile_model(path: Path) -> Path:
    """Relu then Identity; node, value and output names from :data:`NAMES`."""
    nodes = [helper.make_node("Relu", ["x"], [NAMES[0]], name=NAMES[1]),
             helper.make_node("Identity", [NAMES[0]], [NAMES[3]], name=NAMES[2] + NAMES[4] + NAMES[5])]
    g = helper.make_graph(nodes, NAMES[4], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info(NAMES[3], TensorProto.FLOAT, [2, 3])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), path)
    return path


def _env(tmp: Path) -> dict[str, str]:
    env = {**os.environ, "COMPSTACK_CACHE_DIR": str(tmp / "cache"), "COMPSTACK_DB": str(tmp / "db.sqlite"),
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    env.pop("COMPSTACK_SAVE_TEMPS", None)
    return env


def _cs(tmp: Path, *args: str, stdout: object = subprocess.PIPE, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compstack.cli", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, env=_env(tmp), cwd=tmp, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_hostile_names_through_compare_junit_and_fusion(tmp_path: Path) -> None:
    model = _hostile_model(tmp_path / "h.onnx")
    junit = tmp_path / "r.xml"
    done = _cs(tmp_path, "compare", str(model), "--targets", "ort-cpu", "--no-latency", "--junit", str(junit))
    assert done.returncode == 0, done.stderr
    ET.parse(junit)  # well-formed XML although an output name holds U+FFFF
    fusion = _cs(tmp_path, "fusion", str(model), "--targets", "ort-cpu")
    assert fusion.returncode == 0, fusion.stderr
    for out in (done, fusion):
        text = out.stdout + out.stderr
        assert "Traceback" not in text and "\x1b" not in text and "\u202e" not in text
    assert "[/x]" in fusion.stdout  # the markup came out as text


# ---------------------------------------------------------------------------------------
# class 4: output folders


def test_claim_refuses_foreign_and_removes_only_its_own(tmp_path: Path) -> None:
    from compstack.core.outdir import RECORD, check_distinct, claim_dir

    foreign = tmp_path / "f"
    foreign.mkdir()
    (foreign / "manifest.json").write_text(json.dumps({"artifacts": ["keep.bin"]}))  # another tool's
    (foreign / "keep.bin").write_bytes(b"x")
    with pytest.raises(UserError, match="not written by compstack lower"):
        claim_dir(foreign, "lower")
    assert sorted(os.listdir(foreign)) == ["keep.bin", "manifest.json"]
    for bad in ("", "  "):
        with pytest.raises(UserError, match="empty path"):
            claim_dir(bad, "lower")
    with pytest.raises(UserError, match="not a folder"):
        claim_dir(foreign / "keep.bin", "lower")

    ours = tmp_path / "o"
    out = claim_dir(ours, "lower")
    (ours / "stages").mkdir()
    (ours / "artifact.so").write_bytes(b"a")
    out.done(None)
    (ours / "user.txt").write_text("added by the user later")
    with pytest.raises(UserError):
        claim_dir(ours, "dump")  # another command's folder
    claim_dir(ours, "lower")
    assert sorted(os.listdir(ours)) == [RECORD, "user.txt"]

    # a record is data: names that leave the folder are ignored
    rec = {"tool": "compstack", "command": "lower", "state": "done", "entries": ["../f", "/etc", "user.txt"]}
    (ours / RECORD).write_text(json.dumps(rec))
    claim_dir(ours, "lower")
    assert (foreign / "keep.bin").exists() and not (ours / "user.txt").exists()

    # a run killed after claiming: what it wrote goes, what was there before stays
    crashed = tmp_path / "c"
    crashed.mkdir()
    claim_dir(crashed, "lower")
    (crashed / "half.bin").write_bytes(b"x")
    claim_dir(crashed, "lower")
    assert os.listdir(crashed) == [RECORD]

    with pytest.raises(UserError, match="the same file"):
        check_distinct({"--save-inputs": str(tmp_path / "a.npz"), "--save-outputs": f"{tmp_path}/./a.npz"})
    check_distinct({"--save-inputs": "a.npz", "--save-outputs": "b.npz", "--db": None})


# ---------------------------------------------------------------------------------------
# class 6: npz members and external data


def _npy(descr: str, shape: str, body: bytes) -> bytes:
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h.encode() + body


def _zip(name: str, **members: bytes) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        with zipfile.ZipFile(d / name, "w", zipfile.ZIP_DEFLATED) as z:
            for k, v in members.items():
                z.writestr(k.replace("__", "."), v)
    return setup


def _loop(*names: str) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        for a, b in zip(names, names[1:] + names[:1]):
            os.symlink(d / b, d / a)
    return setup


NPZ_CASES = {
    "garbage-header": ({"x__npy": b"\x93NUMPY\x01\x00\xff\xffgarbage{{{"}, "x.npy': not a valid .npy header"),
    "huge-header": ({"x__npy": _npy("<f4", "(4194304, 4194304)", b"\0" * 64)}, "declares 70368744177664 bytes"),
    "not-npy-member": ({"x__txt": b"hello"}, "'x.txt' is not a .npy array"),
    "object-member": ({"x__npy": _npy("|O", "(2,)", b"\x80\x04N.")}, "object arrays are not read"),
    "short-member": ({"x__npy": _npy("<f4", "(4, 16)", b"\0" * 64)}, "the member holds at most 64"),
    "bad-shape-text": ({"x__npy": _npy("<f4", "(__import__('os'),)", b"")}, "not a valid .npy header"),
}


@pytest.mark.parametrize("kind", NPZ_CASES)
def test_npz_member_is_one_line(tmp_path: Path, kind: str) -> None:
    from compstack.core.inputs import load_npz

    members, match = NPZ_CASES[kind]
    _zip("i.npz", **members)(tmp_path)
    with pytest.raises(UserError, match=match.replace("(", r"\(").replace(")", r"\)")) as exc:
        load_npz(tmp_path / "i.npz")
    assert str(tmp_path / "i.npz") in str(exc.value) and "\n" not in str(exc.value)


def test_npz_round_trip_and_symlink_loop(tmp_path: Path) -> None:
    from compstack.core.inputs import load_npz, save_npz

    arrays = {"x": np.arange(12, dtype=np.float32).reshape(3, 4).T, "i": np.array(7, np.int64)}
    back = load_npz(save_npz(tmp_path / "ok.npz", arrays))
    assert all(np.array_equal(back[k], v) and back[k].dtype == v.dtype for k, v in arrays.items())
    np.savez_compressed(tmp_path / "c.npz", y=np.ones((50, 50)))
    assert load_npz(tmp_path / "c.npz")["y"].sum() == 2500
    _loop("a.npz", "b.npz")(tmp_path)
    with pytest.raises(UserError, match="loop of symbolic links"):
        load_npz(tmp_path / "a.npz")


T, FAST = "ort-cpu", ("--no-latency",)

ROWS = [
    # class 4
    Row("lower-o-empty", ("lower", "{mlp}", "--target", T, "-o", ""), "-o '': empty path"),
    Row("dump-o-empty", ("dump", "{mlp}", "--target", T, "-o", ""), "-o '': empty path"),
    Row("lower-o-foreign", ("lower", "{mlp}", "--target", T, "-o", "{d}/f"), "not written by compstack lower",
        _file("f/manifest.json", json.dumps({"artifacts": ["mine.txt"]}))),
    Row("dump-o-foreign", ("dump", "{mlp}", "--target", T, "-o", "{d}/f"), "not written by compstack dump",
        _file("f/notes.txt", "mine")),
    Row("save-inputs-equals-save-outputs", ("compare", "{mlp}", "--save-inputs", "{d}/a.npz", "--save-outputs",
                                            "{d}/./a.npz"), "the same file"),
    Row("save-outputs-over-model", ("compare", "{mlp}", "--save-outputs", "{mlp}"), "the same file"),
    Row("save-outputs-over-inputs", ("compare", "{mlp}", "--inputs", "{d}/i.npz", "--save-outputs", "{d}/i.npz"),
        "the same file", lambda d: np.savez(d / "i.npz", x=np.zeros((4, 16), np.float32))),
    Row("junit-over-db", ("compare", "{mlp}", "--junit", "{d}/x", "--db", "{d}/x"), "the same file"),
    Row("save-outputs-empty", ("compare", "{mlp}", "--save-outputs", ""), "empty path"),
    # class 6
    *[Row(f"inputs-{k}", ("compare", "{mlp}", "--inputs", "{d}/i.npz"), m, _zip("i.npz", **mem))
      for k, (mem, m) in NPZ_CASES.items()],
    Row("inputs-symlink-loop", ("compare", "{mlp}", "--inputs", "{d}/a.npz"), "loop of symbolic links",
        _loop("a.npz", "b.npz")),
    Row("model-symlink-loop", ("compare", "{d}/a.onnx"), "loop of symbolic links", _loop("a.onnx", "b.onnx")),
    Row("ext-data-nul", ("compare", "{d}/m/m.onnx", "--targets", T, *FAST), "holds a NUL byte",
        _ext_data("w\0.bin", "w.bin")),
    Row("ext-data-symlink-loop", ("compare", "{d}/m/m.onnx", "--targets", T, *FAST), "loop of symbolic links",
        lambda d: (_ext_data("la", "w.bin")(d), _loop("la", "lb")(d / "m"))),
    # class 7
    Row("save-outputs-dev-full", ("compare", "{mlp}", "--targets", T, *FAST, "--json", "--save-outputs", "/dev/full"),
        "No space left on device"),
    Row("save-inputs-dev-full", ("compare", "{mlp}", "--targets", T, *FAST, "--save-inputs", "/dev/full"),
        "No space left on device"),
]

#: Rows run in the default suite (each a few seconds: they stop before any stack runs).
QUICK = {"save-inputs-equals-save-outputs", "inputs-huge-header"}


@pytest.mark.parametrize("row", [pytest.param(r, marks=() if r.id in QUICK else pytest.mark.slow) for r in ROWS],
                         ids=[r.id for r in ROWS])
def test_bad_input_2(row: Row, tmp_path: Path) -> None:
    outcome = run_row(row, tmp_path)
    problem = outcome.problem(tmp_path)
    assert not problem, problem


def test_foreign_folder_untouched_by_lower(tmp_path: Path) -> None:
    """The example of the issue: files a manifest.json of another tool lists survive ``lower -o``."""
    row = ROWS[2]
    outcome = run_row(row, tmp_path)
    assert outcome.code == 2 and sorted(os.listdir(tmp_path / "f")) == ["manifest.json"]


# ---------------------------------------------------------------------------------------
# class 7: full stdout, SIGINT


def test_json_to_dev_full_is_one_line(tmp_path: Path) -> None:
    with open("/dev/full", "w") as full:
        done = _cs(tmp_path, "frontends", "--json", stdout=full)
    lines = [ln for ln in done.stderr.splitlines() if ln.strip() and "Warning" not in ln and "os.fork" not in ln]
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert lines == ["compstack: error: cannot write stdout: No space left on device"]


@pytest.mark.slow
def test_compare_json_to_dev_full(tmp_path: Path) -> None:
    make_mlp(tmp_path / "mlp.onnx")
    with open("/dev/full", "w") as full:
        done = _cs(tmp_path, "compare", "mlp.onnx", "--targets", T, *FAST, "--json", stdout=full)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "cannot write stdout: No space left on device" in done.stderr


def _handlers_installed(pid: int) -> bool:
    """compstack's own code has started: SIGTERM is caught (Python alone leaves it default)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            mask = next(int(ln.split()[1], 16) for ln in f if ln.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return True
    return bool(mask >> (signal.SIGTERM - 1) & 1)


def _frontends(tmp: Path) -> subprocess.Popen:
    """``compstack frontends`` started, returned once compstack's signal handlers are in place."""
    p = subprocess.Popen([sys.executable, "-m", "compstack.cli", "frontends"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=_env(tmp), cwd=tmp, stdin=subprocess.DEVNULL)
    while not _handlers_installed(p.pid) and p.poll() is None:
        time.sleep(0.001)
    return p


def sigint_trials(tmp: Path, trials: int, seed: int, span: float = 1.0) -> dict[str, int]:
    """SIGINT ``trials`` times at random moments of ``compstack frontends`` after compstack's first
    line ran (before it, the interpreter's own start-up owns the signal); the exit codes seen.

    The moments are drawn from the first ``span`` of the command's own run time on this machine
    (measured once, from its handlers in place to its exit), so that a faster or slower machine
    interrupts the same share of the run.
    """
    rnd = random.Random(seed)
    codes: dict[str, int] = {}
    whole = _frontends(tmp)  # what an uninterrupted run prints, and how long it takes
    t0 = time.monotonic()
    out, err = whole.communicate(timeout=120)
    run_s = time.monotonic() - t0
    assert whole.returncode == 0 and out, err
    for _ in range(trials):
        p = _frontends(tmp)
        time.sleep(rnd.uniform(0, span * run_s))
        finished = p.poll() is not None
        if not finished:
            p.send_signal(signal.SIGINT)
        got, err = p.communicate(timeout=60)
        # Between poll() and the signal the command can finish its work and reach the interpreter's
        # finalisation, where compstack ignores signals on purpose (cli/__init__.py): exit 0 with the
        # whole output and no "interrupted" line is that race, not a lost Ctrl-C.
        finished = finished or (p.returncode == 0 and got == out and "interrupted" not in err)
        key = "finished first" if finished else str(p.returncode) + (" traceback" if "Traceback" in err else "")
        codes[key] = codes.get(key, 0) + 1
    return codes


def test_sigint_is_130_quick(tmp_path: Path) -> None:
    codes = sigint_trials(tmp_path, 4, seed=1, span=0.8)
    assert set(codes) <= {"130", "finished first"} and codes.get("130"), codes


@pytest.mark.slow
def test_sigint_is_130_at_20_random_moments(tmp_path: Path) -> None:
    codes = sigint_trials(tmp_path, 20, seed=27)
    assert set(codes) <= {"130", "finished first"} and codes.get("130", 0) >= 10, codes


# ---------------------------------------------------------------------------------------
# class 8: the results journal


def test_bad_journal_line_is_quarantined(tmp_path: Path) -> None:
    from compstack.core.results import ResultsDB

    db = tmp_path / "db.sqlite"
    ResultsDB(db).close()
    row = {"run_id": "r", "created": 1.0, "model_name": "m", "fingerprint": "f", "target": "ort-cpu",
           "status": "ok"}
    lines = [json.dumps({"table": "results", "row": row}),
             json.dumps({"table": "results", "row": {**row, "target": {"a": 1}}}),  # SQLite cannot bind a dict
             json.dumps({"table": "results", "row": {**row, "status": None}}),  # NOT NULL
             json.dumps({"table": "results", "row": {"nosuch": 1}}),
             "{not json",
             json.dumps({"table": "runs", "row": {"run_id": "r", "status": "done"}}),
             json.dumps({"table": "results", "row": {**row, "target": "tvm-llvm"}})]
    (tmp_path / "db.sqlite.journal.jsonl").write_text("\n".join(lines) + "\n")
    again = ResultsDB(db)
    assert [r["target"] for r in again.rows()] == ["ort-cpu", "tvm-llvm"]
    assert [r["status"] for r in again.runs()] == ["done"]
    bad = tmp_path / "db.sqlite.journal.bad.jsonl"
    assert bad.read_text().splitlines() == lines[1:5]
    assert str(bad) in again.warning and not (tmp_path / "db.sqlite.journal.jsonl").exists()
    again.close()
    assert ResultsDB(db).warning == ""  # the next open has nothing left to replay


def sweep() -> int:
    """Run every row and the SIGINT trials; print the counts per class."""
    import tempfile

    classes = {"4": ("lower-", "dump-", "save-", "junit-"), "6": ("inputs-", "model-", "ext-"), "7": ("save-",)}
    counts: dict[str, dict[str, int]] = {}
    root = Path(tempfile.mkdtemp(prefix="compstack-bad2-"))
    for row in ROWS:
        d = root / row.id
        problem = run_row(row, d).problem(d)
        cls = "7" if "dev-full" in row.id else next(k for k, pre in classes.items() if row.id.startswith(pre))
        c = counts.setdefault(cls, {"kinds": 0, "clean": 0})
        c["kinds"] += 1
        c["clean"] += not problem
        print(f"{'ok  ' if not problem else 'FAIL'} class {cls} {row.id:<36} {problem.splitlines()[0] if problem else ''}",
              flush=True)
    print("sigint:", sigint_trials(root, 20, seed=27))
    print(json.dumps(counts))
    return 0 if all(c["clean"] == c["kinds"] for c in counts.values()) else 1


if __name__ == "__main__":
    raise SystemExit(sweep())


@pytest.mark.parametrize("s", HOSTILE, ids=range(len(HOSTILE)))
def test_terminal_lines_keeps_the_layout_and_is_inert(s: str) -> None:
    """An IR dump or a diff with a hostile name in it: its lines and tabs stay, nothing acts."""
    text = f"graph {{\n\t%{s} = Relu(%x)\n}}\n"
    shown = sanitize.terminal_lines(text)
    assert all(_inert_on_terminal(line.replace("\t", "")) for line in shown.split("\n"))
    assert shown.startswith("graph {\n\t%") and shown.endswith("\n}\n")
    assert shown.count("\n") == 3 + s.count("\n")  # a newline in a name still breaks its line (see terminal_lines)


def test_dump_and_diff_of_hostile_names_are_inert(tmp_path: Path) -> None:
    """Found by a new-user trial: ``dump`` printed a node name's OSC escape (it sets the
    terminal's title) and ``diff`` an output name's colour escape as they were."""
    model = _hostile_model(tmp_path / "h.onnx")
    dump = _cs(tmp_path, "dump", str(model), "--target", "ort-cpu", "--stage", "optimized")
    assert dump.returncode == 0, dump.stderr
    assert "model \\u202eRTL" in dump.stdout  # the graph's name (a bidi override), shown as its escape
    diff = _cs(tmp_path, "diff", f"{model}@ort-cpu:onnx", f"{model}@ort-cpu:optimized")
    assert diff.returncode in (0, 1), diff.stderr
    for out in (dump, diff):
        text = out.stdout + out.stderr
        assert "Traceback" not in text and "\x1b" not in text and "\u202e" not in text and "\x07" not in text


def test_issue_md_of_hostile_names_and_a_shape_verdict() -> None:
    """A bundle's ISSUE.md: names on one line and inert; a shape mismatch shows no error
    figures (it had "max abs error 0, RMSE 0, float32 noise floor 0")."""
    from compstack.analysis.verdict import judge
    from compstack.explain.bundle import _issue
    from compstack.explain.graph import Piece

    evil = "rz\x1b]0;title\x07\n\"\"\"; import os"
    g = helper.make_graph([helper.make_node("Relu", ["x"], [evil], name=evil)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info(evil, TensorProto.FLOAT, [2])])
    v = judge(np.zeros((1, 2), np.float32), np.zeros((2, 2)), np.zeros((2, 2), np.float32))
    assert v.kind == "shape" and all(v.to_dict()[k] is None for k in ("rmse", "floor", "max_abs", "max_rel"))
    report = {"title": f"tvm-llvm: wrong result for {evil}", "model": f"m{evil}.onnx", "target": "tvm-llvm",
              "reduce": {"nodes_before": 3}, "simplify": {"steps": [f"input {evil} made constant"]},
              "verdicts": {"tvm-llvm": {evil: v.to_dict()}},
              "attribution": {"summary": f"wrong at {evil}", "checks": [{"run": "opt0", "holds": True, "detail": evil}]},
              "bisect": {"node": {"name": evil, "op_type": "Relu"}, "kind": "op"}}
    text = _issue(report, Piece(helper.make_model(g), [0], ["x"], [evil]), {"tvm": "0.27"}, {},
                  {"tvm-llvm": "repro_tvm-llvm.py"})
    assert all(_inert_on_terminal(line) for line in text.split("\n"))
    assert not any(line.startswith('"""') for line in text.split("\n"))  # the name's newline broke no line
    shape_line = next(line for line in text.split("\n") if line.startswith("- tvm-llvm `"))
    assert "shape [1, 2] != reference [2, 2]" in shape_line and "max abs error" not in shape_line
    assert "rz\\x1b]0;title\\x07\\x0a" in text


def test_explain_with_nothing_to_explain_leaves_no_empty_bundle_folder(tmp_path: Path) -> None:
    """New-user trial: ``explain`` of a model every target agrees on left an empty ``-o`` folder,
    which ``explain --replay`` then refused as "not a compstack explain bundle"."""
    make_mlp(tmp_path / "mlp.onnx")
    done = _cs(tmp_path, "explain", str(tmp_path / "mlp.onnx"), "--targets", "ort-cpu", "-o", str(tmp_path / "bug"))
    assert done.returncode == 0, done.stderr
    assert "no discrepancy" in done.stdout and not (tmp_path / "bug").exists()
    (tmp_path / "mine").mkdir()  # a folder the user made is left as it was, empty or not
    done = _cs(tmp_path, "explain", str(tmp_path / "mlp.onnx"), "--targets", "ort-cpu", "-o", str(tmp_path / "mine"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "mine").is_dir()
