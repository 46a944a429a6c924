"""The seam of the Inductor targets' split ``torch.compile``: a TorchDynamo backend that
records the graph in ``lower`` and runs Inductor's ``compile_fx`` on it in ``compile``
(moved out of :mod:`compstack.targets.inductor.target`; see its docstring)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from unittest import mock

__all__ = ["NO_GRAPH", "Capture", "RecompiledAtRun"]


class RecompiledAtRun(RuntimeError):
    """TorchDynamo traced a graph after ``compile`` (see :class:`Capture`): compstack's
    split of ``torch.compile`` into lower, compile and run does not hold for this program."""


def _zeros_like_outputs(gm: Any) -> Any:
    """Zeros shaped like ``gm``'s outputs (``meta["example_value"]``), or None when an
    output's shape is not recorded."""
    import torch

    out = next(n for n in gm.graph.nodes if n.op == "output")
    values = out.args[0] if isinstance(out.args[0], (tuple, list)) else (out.args[0],)
    result = []
    for v in values:
        fake = v.meta.get("example_value") if hasattr(v, "meta") else None
        if not isinstance(fake, torch.Tensor):
            return None
        result.append(torch.zeros(tuple(fake.shape), dtype=fake.dtype, device=fake.device))
    return type(out.args[0])(result) if isinstance(out.args[0], (tuple, list)) else result[0]


def _same_graph(a: Any, b: Any) -> bool:
    """Whether two captured graphs are the same program: the same object, or the same
    generated code (a graph traced again after ``torch._dynamo.reset()``, when another
    program was compiled in this process); the compiled code of one runs the other."""
    try:
        return a is b or bool(a.code == b.code)
    except AttributeError:
        return False


#: Stage text when TorchDynamo found no tensor computation to hand to Inductor.
NO_GRAPH = "(no graph: the program computes nothing TorchDynamo captures (outputs are inputs or constants); " \
            "it runs as plain Python)\n"


class Capture:
    """A TorchDynamo backend that records the graph and defers Inductor until
    :meth:`compile` swaps in Inductor's compiled function.

    The call that triggers the capture (in ``lower``) does not compute: it returns zeros
    shaped like the graph's outputs (from the fake tensors TorchDynamo traced with), so
    input values that would fail eagerly (an integer division by zero, an index out of
    range) fail at ``run``, where they belong, not while capturing. Where the outputs'
    shapes are unknown, the graph runs eagerly instead.

    With ``eager_first`` (the native path), the first call computes eagerly instead: a
    program that changes its own Python state on its first call (timm's LeViT fills an
    attention-bias cache in eval mode, with tensors the graph computes) must get true values,
    and the call after it is traced again by TorchDynamo (its guards on that state fail); the
    graph compiled is the last one captured, the one every later call runs. Compiled code
    only ever runs the graph it was compiled from (or the same program traced again, after
    ``torch._dynamo.reset()``): another graph first traced after ``compile`` raises
    :class:`RecompiledAtRun` (compstack compiles once, in its ``compile`` stage).

    Args:
        eager_first: compute the first call eagerly (see above).
    """

    def __init__(self, eager_first: bool = False) -> None:
        self.graph: Any = None
        self.example_inputs: list[Any] = []
        self.compiled: Any = None
        self.compiled_graph: Any = None
        self.count = 0
        self.eager_first = eager_first

    def __call__(self, gm: Any, example_inputs: list[Any]) -> Callable[..., Any]:
        self.count += 1
        self.graph, self.example_inputs = gm, list(example_inputs)
        import torch._guards

        self.tracing_context = torch._guards.TracingContext.try_get()

        def run(*args: Any) -> Any:
            if self.compiled is not None:
                if not _same_graph(gm, self.compiled_graph):
                    raise RecompiledAtRun("TorchDynamo traced a new graph at run (its guards failed: the program "
                                          "changed its Python state after lower); compstack compiles the graph "
                                          "captured in lower only")
                return self.compiled(*args)
            if self.eager_first and self.count == 1:
                return gm(*args)
            placeholder = _zeros_like_outputs(gm)
            return placeholder if placeholder is not None else gm(*args)

        return run

    def compile_aot_eager(self) -> tuple[list[str], list[str]]:
        """TorchDynamo's ``aot_eager`` backend on the captured graph instead of Inductor."""
        if self.graph is None:
            return [NO_GRAPH], [NO_GRAPH]
        import torch
        from torch._dynamo.backends.registry import lookup_backend

        with torch.no_grad():
            self.compiled = lookup_backend("aot_eager")(self.graph, self.example_inputs)
        self.compiled_graph = self.graph
        note = "(backend=aot_eager: no Inductor code generation)\n"
        return [note], [note]

    def compile(self, record: bool, freezing: bool, mode: str = "default",
                config_patches: dict[str, Any] | None = None) -> tuple[list[str], list[str]]:
        """Run Inductor on the captured graph; returns (post-grad graphs, output code).
        Without a graph (a program with no tensor computation) there is nothing to do."""
        if self.graph is None:
            return [NO_GRAPH], [NO_GRAPH]
        import torch
        from torch._inductor import config
        from torch._inductor.compile_fx import compile_fx
        from torch._inductor.custom_graph_pass import CustomGraphPass
        from torch._inductor.graph import GraphLowering

        post: list[str] = []
        codes: list[str] = []

        class RecordPostGrad(CustomGraphPass):
            def __call__(self, graph: Any) -> None:
                post.append(str(graph))

            def uuid(self) -> Any:
                return "compstack-record-post-grad-1"  # a fixed uuid keeps the FX graph cache usable

        from torch._inductor import list_mode_options

        patches = {"post_grad_custom_post_pass": RecordPostGrad(), "freezing": freezing,
                   **(list_mode_options(mode) if mode != "default" else {}), **(config_patches or {})}
        if record:
            patches["force_disable_caches"] = True
        import torch._guards

        with config.patch(patches), mock.patch.object(GraphLowering, "save_output_code", codes.append), \
                torch.no_grad(), torch._guards.tracing(self.tracing_context):
            self.compiled = compile_fx(self.graph, self.example_inputs)
        self.compiled_graph = self.graph
        return post, codes
