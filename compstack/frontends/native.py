"""Native programs: the framework program a model came from, for XLA's and Inductor's
native paths (DESIGN.md, "The common IR": a JAX source compiles natively on XLA, a
PyTorch source on Inductor; anything else goes through the translated path).

A :class:`NativeProgram` is never serialised: a worker process rebuilds it from the
model spec with :func:`compstack.frontends.sources.load_native` (the zoo builder or the user's ``file.py:function``
runs again; no ONNX export happens).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["MUTATED_SUFFIX", "NativeProgram", "align_torch_weights", "flatten_outputs",
           "mutated_inputs", "torch_program"]


@dataclass
class NativeProgram:
    """A framework program and how the common IR's inputs feed it.

    Attributes:
        framework: ``torch`` or ``jax``.
        fn: the ``torch.nn.Module`` / ``ExportedProgram``, or the JAX function.
        input_names: the common IR's graph-input names, in the order ``pack`` takes them.
        pack: ``pack(arrays) -> (args, kwargs)`` turning framework arrays, in
            ``input_names`` order, into the call's arguments (pytrees rebuilt).
    """

    framework: str
    fn: Any
    input_names: list[str]
    pack: Callable[[list[Any]], tuple[tuple[Any, ...], dict[str, Any]]]

    def args(self, inputs: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``(args, kwargs)`` for ``fn`` from inputs keyed by IR input name."""
        return self.pack([inputs[n] for n in self.input_names])


#: Suffix of a graph output that holds an input's value after the program mutated it in
#: place (written by :mod:`compstack.frontends.from_torch`).
MUTATED_SUFFIX = "@mutated"


def mutated_inputs(model: Any, input_names: list[str]) -> list[int]:
    """Positions in ``input_names`` of the inputs whose new values are graph outputs
    (``<input>@mutated``), in output order: what a native program must append to its own
    outputs, since it changes those inputs in place instead of returning them."""
    out = []
    for v in model.graph.outputs:
        base = v.name[: -len(MUTATED_SUFFIX)] if v.name and v.name.endswith(MUTATED_SUFFIX) else ""
        if base in input_names:
            out.append(input_names.index(base))
    return out


def flatten_outputs(out: Any, framework: str = "torch") -> list[Any]:
    """The leaves of a program's output pytree, in order, ``None`` dropped: the order of
    the exported graph's outputs (``torch.export`` and ``jax`` both flatten this way).

    Args:
        out: the program's output (tensor, tuple, dict, ``ModelOutput``...).
        framework: ``torch`` (torch's pytree registry, which knows ``ModelOutput``) or
            ``jax`` (``jax.tree_util``).
    """
    if framework == "jax":
        import jax

        leaves = jax.tree_util.tree_leaves(out)
    else:
        import torch.utils._pytree as pytree

        leaves = pytree.tree_leaves(out)
    return [x for x in leaves if x is not None]


def torch_program(module: Any, example_inputs: Any, input_names: list[str]) -> NativeProgram:
    """A :class:`NativeProgram` for a torch module called like it was exported:
    positionally when ``example_inputs`` is a tuple/list (or one tensor), by keyword when
    it is a dict (keys = IR input names).

    Args:
        module: ``nn.Module`` or ``ExportedProgram`` (its ``.module()`` is called).
        example_inputs: what the frontend exported with.
        input_names: the IR's graph-input names in the exported order.
    """
    import torch

    fn = module.module() if isinstance(module, torch.export.ExportedProgram) else module
    if isinstance(example_inputs, Mapping):
        keys = list(example_inputs)
        names = [n for n in input_names if n in keys] or keys
        return NativeProgram("torch", fn, names, lambda xs: ((), dict(zip(names, xs))))
    return NativeProgram("torch", fn, list(input_names), lambda xs: (tuple(xs), {}))


def align_torch_weights(native: NativeProgram, model: Any) -> int:
    """Make a rebuilt torch module compute the imported model: every parameter or buffer
    whose name and shape match an initializer of the common IR gets the IR's value.

    ``build()`` runs again in the worker, so a module whose weights are drawn without a
    seed would otherwise differ from the graph that was imported and compared
    (``torch.onnx`` names initializers after the state-dict keys).

    Returns:
        The number of tensors whose values differed and were replaced.
    """
    import torch

    module = native.fn
    if not isinstance(module, torch.nn.Module):
        return 0
    inits = model.graph.initializers
    replaced = 0
    with torch.no_grad():
        for name, tensor in module.state_dict(keep_vars=True).items():
            value = inits.get(name)
            if value is None or value.const_value is None:
                continue
            arr = value.const_value.numpy()
            if tuple(arr.shape) != tuple(tensor.shape):
                continue
            src = torch.from_numpy(np.array(arr)).to(dtype=tensor.dtype, device=tensor.device)
            if not torch.equal(src, tensor.detach()):
                tensor.data.copy_(src)
                replaced += 1
    return replaced
