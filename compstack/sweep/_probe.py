"""The installed stacks' versions, read in a child process (``sweep --resume``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["probe_versions"]

#: Reads each target class's ``availability().versions`` (as its worker does) and prints
#: them as JSON: ``{name: versions or null}``.
_VERSIONS_PROBE = ("import json, sys\nfrom compstack.run.jobs import load_target_class\nout = {}\n"
                   "for name, ref in json.loads(sys.argv[1]).items():\n"
                   "    try:\n        out[name] = dict(load_target_class(ref).availability().versions)\n"
                   "    except Exception:\n        out[name] = None\n"
                   "print(json.dumps(out))\n")


def probe_versions(refs: Mapping[str, str], timeout_s: float = 300.0) -> dict[str, Any]:
    """The stack versions of each target (``{name: target_ref}``), read in one child
    process: importing every stack here would put JAX's and the BLAS pools' threads in the
    driver, which forks a worker per job (a fork beside them can deadlock the child).
    A target that does not load gives ``None``; a probe that fails gives ``{}``."""
    import subprocess

    from compstack.core.procs import python_code_argv

    if not refs:
        return {}
    try:
        res = subprocess.run(python_code_argv(_VERSIONS_PROBE, json.dumps(dict(refs))), capture_output=True,
                             text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        return dict(json.loads(res.stdout.strip().splitlines()[-1])) if res.returncode == 0 else {}
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return {}
