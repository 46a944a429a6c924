"""compstack: one model, every ML compiler stack, compared on the same graph.

``import compstack`` loads no compiler stack (no torch, jax, tvm, iree, onnxruntime);
stacks load when a target is used.
"""

from __future__ import annotations

from compstack.core.version import __version__

__all__ = ["__version__"]
