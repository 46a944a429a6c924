"""xla-cpu and inductor-cpu keep their compiled programs in compstack's store: a second
compile of the same model is a hit of the stack's own persistent cache (JAX's
compilation cache, Inductor's FX graph cache), read from ``<root>/jax-cache/`` and
``<root>/inductor-cache/``; without a store root (``--no-cache``) nothing is cached."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from compstack.core import ir as cir
from compstack.targets import get
from compstack.targets.base import LowerRequest
from compstack.targets.common.twopath import private_cache_dir
from conftest import make_mlp

pytest.importorskip("jax")
pytest.importorskip("torch")


def _compile(name: str, model, root: Path | None):
    target = get(name)(None, LowerRequest(cache_root=root))
    return target.lower(model).compile()


def test_xla_second_compile_is_a_jax_cache_hit(tmp_path: Path) -> None:
    from compstack.targets.xla.cache import cache_hits

    model = cir.load(make_mlp(tmp_path / "mlp.onnx"))
    root = tmp_path / "store"
    with cache_hits() as first:
        a = _compile("xla-cpu", model, root)
    with cache_hits() as second:
        b = _compile("xla-cpu", model, root)
    assert first == [0] and second == [1]
    entries = [p for p in (root / "jax-cache").glob("*/*") if p.name.endswith("-cache")]
    assert entries, list((root / "jax-cache").rglob("*"))
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    np.testing.assert_array_equal(a.run({"x": x})["y"], b.run({"x": x})["y"])
    assert "/fc1/" in b.as_text("hlo-optimized")  # the executable read back keeps XLA's metadata
    target = get("xla-cpu")(None, LowerRequest(cache_root=root))
    assert "fusion" in target.applied_passes(model)  # the pass dump bypasses the warm cache
    with cache_hits() as again:
        _compile("xla-cpu", model, root)
    assert again == [1]  # and the cache is back on after it
    with cache_hits() as off:
        _compile("xla-cpu", model, None)  # --no-cache: JAX's cache is switched off
    assert off == [0]


def test_inductor_second_compile_is_an_fx_graph_cache_hit(tmp_path: Path) -> None:
    from torch._dynamo.utils import counters

    model = cir.load(make_mlp(tmp_path / "mlp.onnx"))
    root = tmp_path / "store"
    counters.clear()
    a = _compile("inductor-cpu", model, root)
    assert counters["inductor"]["fxgraph_cache_hit"] == 0
    assert counters["inductor"]["fxgraph_cache_bypass"] == 0  # was 1 ("No shape env") before
    b = _compile("inductor-cpu", model, root)
    assert counters["inductor"]["fxgraph_cache_hit"] == 1
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"].startswith(str(root / "inductor-cache"))
    assert list((root / "inductor-cache").glob("*/fxgraph/*"))
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    np.testing.assert_array_equal(a.run({"x": x})["y"], b.run({"x": x})["y"])
    counters.clear()
    _compile("inductor-cpu", model, None)  # --no-cache: caches off for the compile
    assert counters["inductor"]["fxgraph_cache_hit"] == 0


def test_private_cache_dir_is_the_users_own(tmp_path: Path) -> None:
    folder = private_cache_dir(tmp_path, "jax-cache", {"jax": "1"})
    assert folder is not None and folder.parent == tmp_path / "jax-cache"
    for d in (folder, folder.parent):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert private_cache_dir(tmp_path, "jax-cache", {"jax": "2"}) != folder  # keyed by the stack's version
    os.chmod(folder, 0o770)  # opened to the group: not used
    assert private_cache_dir(tmp_path, "jax-cache", {"jax": "1"}) is None
    assert private_cache_dir(None, "jax-cache", {"jax": "1"}) is None


def test_a_cache_folder_changed_outside_a_compstack_worker_is_emptied(tmp_path: Path) -> None:
    from compstack.targets.common.twopath import seal_cache_dir

    folder = private_cache_dir(tmp_path, "inductor-cache", {"torch": "x"})
    assert folder is not None
    (folder / "sub").mkdir()
    (folder / "sub" / "entry.bin").write_bytes(b"compiled")
    seal_cache_dir(folder)  # what a worker does after its compile
    assert private_cache_dir(tmp_path, "inductor-cache", {"torch": "x"}) == folder
    assert (folder / "sub" / "entry.bin").read_bytes() == b"compiled"  # sealed: kept
    (folder / "sub" / "entry.bin").write_bytes(b"tampered")  # same size, other bytes
    assert private_cache_dir(tmp_path, "inductor-cache", {"torch": "x"}) == folder
    assert not any(folder.rglob("*"))  # emptied: the stack compiles anew
    (folder / "planted.py").write_text("import os")  # a file no worker sealed
    private_cache_dir(tmp_path, "inductor-cache", {"torch": "x"})
    assert not (folder / "planted.py").exists()
