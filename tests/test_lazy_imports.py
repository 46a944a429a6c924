"""compstack defers sympy, which onnx_ir imports at the top and compstack rarely needs
(``compstack.core._lazy``): a command that never builds a symbolic shape does not pay
sympy's import, and every path that does use sympy still gets the real module."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _py(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip()


def test_importing_compstack_and_onnx_ir_leaves_sympy_unloaded() -> None:
    out = _py("import sys, compstack, onnx_ir\n"
              "from compstack.core import ir as cir\n"
              "m = sys.modules['sympy']\n"
              "print(type(m).__name__, 'sympy.core' in sys.modules)")
    assert out == "_Deferred False"


def test_a_symbolic_dim_loads_the_real_sympy() -> None:
    out = _py("import compstack, onnx_ir as ir, sys\n"
              "d = ir.SymbolicDim('N')\n"
              "import sympy\n"
              "e = sympy.Symbol('N') + 1\n"
              "print(type(e).__name__, sympy.Max(2, 3), 'sympy.core' in sys.modules)")
    assert out == "Add 3 True"


@pytest.mark.parametrize("first", ["from sympy import Symbol", "import sympy.core.symbol"])
def test_every_way_of_importing_sympy_gives_the_real_module(first: str) -> None:
    out = _py(f"import compstack\n{first}\n"
              "import sympy\n"
              "x = sympy.Symbol('x')\n"
              "print(sympy.simplify(x + x), sympy.__version__ != '')")
    assert out == "2*x True"


def test_torch_which_uses_sympy_still_traces_symbolic_shapes() -> None:
    pytest.importorskip("torch")
    out = _py("import compstack, torch\n"
              "from torch.export import Dim, export\n"
              "class M(torch.nn.Module):\n"
              "    def forward(self, x):\n"
              "        return torch.cat([x, x]).sum(0) * x.shape[0]\n"
              "ep = export(M(), (torch.ones(8, 3),), dynamic_shapes={'x': {0: Dim('n', min=2)}})\n"
              "print(str(ep.range_constraints), float(ep.module()(torch.ones(6, 3))[0]))")
    assert out.endswith(" 72.0") and "VR[2," in out, out
