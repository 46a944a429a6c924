"""What one job gives a target besides its options: :class:`LowerRequest`, fixed when the
target is built (``Target(options, request)``), and the read-only view of it every
:class:`compstack.targets.base.Target` has (:class:`RequestView`).

Before this, the worker built a target and then set ``native``, ``example_inputs``,
``threads``, ``cache_root``, ``record_stages``... on it (issue #12, part 2). Now the worker
loads the model and the source first, builds one request, then the target, once; a job
that needs a variant (stages recorded) builds it with :func:`dataclasses.replace`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import onnx_ir as ir

__all__ = ["LowerRequest", "RequestView"]


@dataclass(frozen=True, eq=False)
class LowerRequest:
    """The job's context of a target, beside its options. Every field has a default: a
    target built without a request (``Target()``) lowers the model alone, at the stack's
    own thread count, without compstack's cache.

    Compared by identity (``eq=False``): the fields hold NumPy arrays and models, which
    have no single truth value for ``==``.

    Attributes:
        example_inputs: input set 0 by graph-input name (NumPy arrays of the shapes and
            dtypes the job runs with; strings as unicode arrays), or None when the job has
            none. Stacks that trace with real tensors (Inductor, XLA, TorchScript) fix
            symbolic dims from it.
        native: the source's framework program
            (:class:`compstack.frontends.native.NativeProgram`, weights already aligned to
            the imported model) when the target compiles that framework natively
            (``Target.native_framework``); None otherwise.
        native_note: why the native program is not used as is (rebuilt weights replaced,
            an unseeded JAX ``build()``); ``""`` when there is nothing to say. Goes into
            the row's ``flags["native_note"]``.
        source_framework: the framework the job's source was written in (``torch``,
            ``jax``; ``""`` for an ONNX file), for messages.
        model: the job's model as :meth:`Target.lower` will get it (an
            ``onnx_ir.Model``), when the target is built for one job; two-path targets
            decide from it, before lowering, whether to translate the canonical form
            (:attr:`canonical_path`). None: no such decision (the target serves many
            models).
        canonical_path: path of the canonical ONNX file in the model store, already
            verified against its manifest by the worker, when the job's model is another
            form (as written, ``--opset N``); ``""`` otherwise.
        record_stages: whether the job writes the stage texts (``dump``, ``lower -o``):
            stacks whose compile cache would hide stages (Inductor) compile with it off.
        threads: threads the job asked the stack for (``>= 0``; 0: the stack's own
            default); the process-wide knob is already set
            (:meth:`compstack.targets.base.Target.apply_threads`), stacks whose knob is per
            session (ORT, OpenVINO) read this.
        cache_root: compstack's store root, for records a stack keeps between runs (TVM
            tuning logs, JAX's and Inductor's compile caches); None under ``--no-cache``
            (then they live in a scratch folder or nowhere).
    """

    example_inputs: "dict[str, np.ndarray] | None" = None
    native: Any = None
    native_note: str = ""
    source_framework: str = ""
    model: "ir.Model | None" = None
    canonical_path: str = ""
    record_stages: bool = False
    threads: int = 0
    cache_root: Path | None = None

    def __post_init__(self) -> None:
        if self.threads < 0:
            raise ValueError(f"LowerRequest.threads={self.threads}: expected >= 0")


class RequestView:
    """Read-only attributes of a target that come from its :class:`LowerRequest`
    (``target.native`` is ``target.request.native``): there are no setters, so assigning
    one raises ``AttributeError``; build the target with another request instead."""

    _request: LowerRequest

    @property
    def request(self) -> LowerRequest:
        """The request the target was built with."""
        return self._request

    @property
    def example_inputs(self) -> "dict[str, np.ndarray] | None":
        """:attr:`LowerRequest.example_inputs`."""
        return self._request.example_inputs

    @property
    def native(self) -> Any:
        """:attr:`LowerRequest.native`."""
        return self._request.native

    @property
    def native_note(self) -> str:
        """:attr:`LowerRequest.native_note`."""
        return self._request.native_note

    @property
    def source_framework(self) -> str:
        """:attr:`LowerRequest.source_framework`."""
        return self._request.source_framework

    @property
    def record_stages(self) -> bool:
        """:attr:`LowerRequest.record_stages`."""
        return self._request.record_stages

    @property
    def threads(self) -> int:
        """:attr:`LowerRequest.threads`."""
        return self._request.threads

    @property
    def cache_root(self) -> Path | None:
        """:attr:`LowerRequest.cache_root`."""
        return self._request.cache_root
