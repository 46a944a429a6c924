"""Trust, second round (issue #27, class 5): no process outlives compstack or its job.

Every helper process gets the parent-death signal (the Python-source worker had none),
compstack is a child subreaper, so a grandchild that calls ``setsid`` and double-forks
comes back to it, and such escaped processes are killed when the job ends.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from compstack.core import procs
from conftest import gone

_ESCAPE = textwrap.dedent('''
    import os, time
    import onnx
    from onnx import TensorProto, helper

    def _escape(pidfile):
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:  # the grandchild: in its own session, its parent gone
                f = open(pidfile + ".tmp", "w")
                f.write(str(os.getpid()))
                f.close()
                os.rename(pidfile + ".tmp", pidfile)
                time.sleep(600)
            os._exit(0)

    def build():
        pidfile = os.path.join(os.path.dirname(os.path.abspath(__file__)), "escaped.pid")
        _escape(pidfile)
        while not os.path.exists(pidfile):
            time.sleep(0.01)
        graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    def hang():
        open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.pid"), "w").write(str(os.getpid()))
        time.sleep(600)
''')


def _pid(path: Path, within_s: float = 60.0) -> int:
    deadline = time.monotonic() + within_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    return int(path.read_text())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux only")
def test_issue_example_setsid_double_fork_grandchild_of_build_is_killed(tmp_path: Path) -> None:
    """The issue's example: ``build()`` forks a child that calls setsid and double-forks."""
    from compstack.frontends._pyworker import import_isolated

    (tmp_path / "m.py").write_text(_ESCAPE)
    source = import_isolated(f"{tmp_path / 'm.py'}:build", timeout_s=120, memory_mb=0)
    assert [n.op_type for n in source.model.graph] == ["Relu"]
    pid = _pid(tmp_path / "escaped.pid")
    alive = not gone(pid, 2.0)
    if alive:  # leave nothing behind even when the assertion fails
        os.kill(pid, signal.SIGKILL)
    assert not alive, "the setsid+double-fork grandchild of build() outlived the import"


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux only")
def test_sigkill_on_compstack_kills_the_python_source_worker(tmp_path: Path) -> None:
    """SIGKILL on the process importing ``file.py:hang``: its worker dies with it."""
    (tmp_path / "m.py").write_text(_ESCAPE)
    code = ("from compstack.frontends._pyworker import import_isolated; "
            f"import_isolated({str(tmp_path / 'm.py') + ':hang'!r}, timeout_s=600, memory_mb=0)")
    parent = subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ))
    try:
        worker = _pid(tmp_path / "worker.pid")
    finally:
        parent.kill()
        parent.wait()
    ended = gone(worker)
    if not ended:
        os.kill(worker, signal.SIGKILL)
    assert ended, "the Python-source worker outlived a SIGKILLed compstack"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux only")
def test_kill_escaped_spares_compstack_helpers_and_same_session_children(tmp_path: Path) -> None:
    """Only escaped processes die: a live helper started by :func:`procs.popen` and a child
    a library started in this process's session are left alone."""
    helper = procs.popen([sys.executable, "-c", "import time; time.sleep(60)"])
    plain = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    escaped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        killed = procs.kill_escaped()
        assert escaped.pid in killed and helper.pid not in killed and plain.pid not in killed
        assert helper.poll() is None and plain.poll() is None
    finally:
        for p in (helper, plain, escaped):
            p.kill()
            try:
                p.wait(5)
            except (subprocess.TimeoutExpired, ChildProcessError):
                pass


def test_a_child_outlives_the_thread_that_started_it_but_not_the_process(tmp_path: Path) -> None:
    """PR_SET_PDEATHSIG fires when the forking *thread* exits: a pooled worker started by a
    conformance thread that ran out of cases was SIGKILLed in the middle of another
    thread's case (CI: 'worker died by SIGKILL ... in stage lower' after 0.6 s)."""
    import threading

    started: list[subprocess.Popen] = []
    t = threading.Thread(target=lambda: started.append(
        procs.popen([sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.DEVNULL)))
    t.start()
    t.join()
    child = started[0]
    try:
        time.sleep(1.0)
        assert child.poll() is None, f"the child died with its thread: returncode {child.returncode}"
    finally:
        procs.kill_group(child)
        child.wait(10)
    # and it still dies with its process: a parent that starts one from a thread, then exits
    code = ("import subprocess, sys, threading, time\n"
            "from compstack.core import procs\n"
            "box = []\n"
            "t = threading.Thread(target=lambda: box.append(procs.popen([sys.executable, '-c', "
            "'import time; time.sleep(60)'], stdin=subprocess.DEVNULL)))\n"
            "t.start(); t.join(); print(box[0].pid, flush=True)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert gone(int(out.stdout.split()[0]), 10)


def test_an_empty_pythonpath_entry_does_not_put_the_current_folder_on_a_childs_path(tmp_path: Path) -> None:
    """``PYTHONPATH=/x:`` puts the current folder on ``sys.path`` (the empty entry), ``-P`` or
    not: compstack's children get the entry dropped (a worker then starts TVM's workers with it)."""
    assert procs.without_current_folder({"PYTHONPATH": f"/a{os.pathsep}{os.pathsep}.{os.pathsep}/b", "X": "1"}) == \
        {"PYTHONPATH": f"/a{os.pathsep}/b", "X": "1"}
    assert "PYTHONPATH" not in procs.without_current_folder({"PYTHONPATH": os.pathsep})
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "elsewhere") + os.pathsep}
    child = procs.popen([sys.executable, "-P", "-c", "import os, sys; print('' in sys.path or os.getcwd() in sys.path)"],
                        env=env, cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    out, _ = child.communicate(timeout=60)
    assert out.strip() == "False"


def test_blas_in_one_thread_while_another_forks_never_hangs() -> None:
    """A sweep's driver compares outputs (BLAS) on its main thread while the spawner thread
    forks workers: with OpenBLAS's thread pool, its fork handler stranded the main thread's
    call in ``exec_blas_async`` (100 % CPU, for ever). ``procs.popen`` makes BLAS
    single-threaded in its process first, so this loop ends."""
    code = textwrap.dedent("""
        import threading, time, numpy as np
        from compstack.core import procs
        stop = []
        def forker():
            while not stop:
                procs.popen(["true"]).wait()
        procs.popen(["true"]).wait()
        threading.Thread(target=forker, daemon=True).start()
        a, t0, n = np.random.default_rng(0).random(200_000), time.monotonic(), 0
        while time.monotonic() - t0 < 8:
            float(np.linalg.norm(a)); n += 1
        stop.append(1)
        from threadpoolctl import threadpool_info
        print(n, sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}))
    """)
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail("a BLAS call hung while the spawner thread forked")
    assert proc.returncode == 0, proc.stderr[-2000:]
    calls, threads = proc.stdout.split(maxsplit=1)
    assert int(calls) > 100 and threads.strip() == "[1]"
