"""``compstack daemon status|stop`` and installs (issue #28 part 3): status names each
daemon's interpreter, venv and compstack folder; a plain ``stop`` stops only this
install's daemons, ``--all`` the rest. Two real servers: one of this interpreter, one of a
second venv's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import run_cli


def _serve(python: str, sock: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([python, "-P", "-m", "compstack.run.daemon_server", "--serve", str(sock), "--idle", "120"],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd="/")


@pytest.fixture
def two_installs(tmp_path: Path) -> Iterator[tuple[dict[str, str], Path, list[subprocess.Popen]]]:
    """A socket folder of its own with a daemon of this install and one of another venv."""
    runtime = Path(tempfile.mkdtemp(prefix="cs-di-"))  # short: Unix socket paths are at most 107 bytes
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    other = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False, symlinks=True).create(other)
    folder = runtime / "compstack"
    folder.mkdir(mode=0o700)
    procs = [_serve(sys.executable, folder / "aaaa.sock", env), _serve(str(other / "bin" / "python"),
                                                                      folder / "bbbb.sock", env)]
    deadline = time.monotonic() + 120
    while not all((folder / f"{k}.sock").exists() for k in ("aaaa", "bbbb")) and time.monotonic() < deadline:
        assert all(p.poll() is None for p in procs)
        time.sleep(0.1)
    yield env, other, procs
    for p in procs:
        p.kill()
        p.wait()
    subprocess.run(["rm", "-rf", str(runtime)], check=False)


def _daemons(env: dict[str, str]) -> dict[str, dict]:
    p = run_cli("daemon", "status", "--json", env=env)
    assert p.returncode == 0, p.stderr
    return {d["key"]: d for d in json.loads(p.stdout)["daemons"]}


def test_status_names_the_install_and_stop_keeps_other_installs(two_installs: tuple) -> None:
    import compstack

    env, other, procs = two_installs
    found = _daemons(env)
    assert set(found) == {"aaaa", "bbbb"}
    mine, theirs = found["aaaa"], found["bbbb"]
    assert mine["python"] == sys.executable and mine["prefix"] == sys.prefix and mine["this_install"] is True
    assert mine["compstack"] == str(Path(compstack.__file__).resolve().parent)
    assert theirs["python"] == str(other / "bin" / "python") and theirs["prefix"] == str(other)
    assert theirs["this_install"] is False
    text = run_cli("daemon", "status", env=env).stdout
    assert f"venv {other}" in text and "another install (stop it with --all)" in text
    p = run_cli("daemon", "stop", "--json", env=env)
    assert p.returncode == 0, p.stderr
    assert [d["key"] for d in json.loads(p.stdout)["stopped"]] == ["aaaa"]
    assert procs[0].wait(timeout=30) is not None and procs[1].poll() is None
    assert set(_daemons(env)) == {"bbbb"}
    p = run_cli("daemon", "stop", "--all", env=env)
    assert p.returncode == 0 and "stopped 1 daemon(s)" in p.stdout, p.stderr
    assert procs[1].wait(timeout=30) is not None
    p = run_cli("daemon", "stop", "--all", "--current", env=env)
    assert p.returncode == 2 and "--current and --all" in p.stderr
