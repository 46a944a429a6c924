"""``import openvino`` without its telemetry.

``import openvino`` imports ``openvino.tools.ovc``, whose ``__init__`` sends a
"general_import" event to Google Analytics through ``openvino_telemetry``; on Linux that
backend sends from a ``multiprocessing.Process`` (the ``fork`` start method), so a process
that has imported JAX (``compstack targets``, a test run) printed JAX's "os.fork() was
called ... will likely lead to a deadlock" warning, and every compstack run that touched
OpenVINO made a network request. OpenVINO falls back to its own no-op
``openvino.tools.ovc.telemetry_stub`` when ``openvino_telemetry`` does not import
(``telemetry_utils.py``); this module makes it not import while openvino loads.
"""

from __future__ import annotations

import sys
from types import ModuleType

__all__ = ["import_openvino"]


def import_openvino() -> ModuleType:
    """``openvino``, imported (once) with its telemetry off.

    Raises:
        ImportError: openvino is not installed or does not load.
    """
    if "openvino" in sys.modules:
        loaded = sys.modules["openvino"]
        if loaded is None:  # blocked (``sys.modules["openvino"] = None``): import says so
            raise ImportError("import of openvino halted; None in sys.modules")
        return loaded
    blocked = "openvino_telemetry" not in sys.modules
    if blocked:
        sys.modules["openvino_telemetry"] = None  # type: ignore[assignment]  # ImportError -> OpenVINO's stub
    try:
        import openvino
    finally:
        if blocked and sys.modules.get("openvino_telemetry", 0) is None:
            del sys.modules["openvino_telemetry"]
    return openvino
