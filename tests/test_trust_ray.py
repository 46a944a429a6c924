"""Trust, second round (issue #27, class 0): another local user cannot use a sweep's Ray cluster.

The local cluster compstack starts listens on 127.0.0.1 only and requires Ray's token
authentication, with a token file only the user can read. The test creates a second
local user (as root only), and from a process running as that user tries what the
issue's attacker did: read the token, and write into the GCS key-value store. A control
with the real token shows that the token, and nothing else, keeps that user out.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytest.importorskip("ray")

#: Runs as root, drops to the other user, then tries the token file and the GCS.
_PROBE = """
import os, sys
import ray._raylet as raylet
uid, gid, gcs, token_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
os.setgroups([]); os.setgid(gid); os.setuid(uid)
try:
    open(token_path).read()
    print("token: read")
except OSError as exc:
    print("token: refused", type(exc).__name__)
try:
    client = raylet.GcsClient(address=gcs)
    client.internal_kv_put(b"compstack-probe", b"hostile", True, b"fun", timeout=10)
    print("gcs: wrote")
except Exception as exc:
    print("gcs: refused", type(exc).__name__)
"""


@pytest.fixture
def other_user() -> tuple[int, int]:
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("a second local user needs root and useradd")
    name = f"cstrust{uuid.uuid4().hex[:6]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True,
                   capture_output=True)
    try:
        pw = pwd.getpwnam(name)
        yield pw.pw_uid, pw.pw_gid
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def _probe(uid: int, gid: int, gcs: str, token: Path, env: dict[str, str]) -> str:
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    done = subprocess.run([sys.executable, "-c", _PROBE, str(uid), str(gid), gcs, str(token)], cwd="/",
                          env={**base, **env}, capture_output=True, text=True, timeout=120)
    return f"{done.stdout}rc={done.returncode}\n{done.stderr[-600:]}"


def _listening(pids: set[int]) -> list[str]:
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    return [line.split()[3] for line in out.splitlines() if any(f"pid={p}," in line for p in pids)]


def _tree(pid: int) -> set[int]:
    from compstack.core.procs import _descendants

    return {pid, *_descendants(pid)}


def test_issue_example_other_user_cannot_reach_the_sweep_cluster(other_user: tuple[int, int]) -> None:
    import ray

    from compstack.sweep._ray import RayExecutor

    uid, gid = other_user
    ex = RayExecutor(num_cpus=1)  # the default session folder: AF_UNIX paths stay short
    try:
        token = Path(os.environ["RAY_AUTH_TOKEN_PATH"])
        assert os.environ["RAY_AUTH_MODE"] == "token" and token.parent == ex.temp_dir
        st = token.stat()
        assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()
        ports = _listening(_tree(os.getpid()))
        assert ports and all(p.startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:")) for p in ports), ports
        gcs = ray.get_runtime_context().gcs_address
        seen = _probe(uid, gid, gcs, token, {"RAY_AUTH_MODE": "disabled"})  # no token, as the issue's attacker
        assert "token: refused" in seen and "gcs: refused" in seen, seen
        seen = _probe(uid, gid, gcs, token, {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 64})
        assert "gcs: refused" in seen, seen
        control = _probe(uid, gid, gcs, token, {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token.read_text()})
        assert "gcs: wrote" in control, control  # the token, and only the token, lets a process in
    finally:
        ex.close()
    assert "RAY_AUTH_TOKEN_PATH" not in os.environ and not token.exists()
