"""The JAX frontend: jaxpr -> ONNX conversion checked against JAX itself on onnxruntime,
provenance, errors, the ``jax-*`` zoo models and ``file.py:function`` JAX sources."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from compstack.core import ir as cir
from compstack.core.errors import UserError
from compstack.frontends import zoo
from conftest import run_cli

jax = pytest.importorskip("jax")
ort = pytest.importorskip("onnxruntime")
jnp = jax.numpy
lax = jax.lax

from compstack.frontends.from_jax import import_jax  # noqa: E402 - after the importorskip above
from compstack.frontends.from_pyfile import import_pyfile, native_of  # noqa: E402

JAX_ZOO = ["jax-mlp", "jax-transformer", "jax-cnn"]
ZOO_JAX_FILE = Path(zoo.__file__).resolve().parent / "_jax.py"
RNG = np.random.RandomState(0)


def _run_ort(source: cir.SourceModel, inputs: dict[str, np.ndarray] | None = None) -> list[np.ndarray]:
    sess = ort.InferenceSession(cir.to_proto(source.model).SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, inputs if inputs is not None else source.example_inputs)


def _run_native(program, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    args, kwargs = program.args(inputs)
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(program.fn(*args, **kwargs))]


def _check(fn, args, rtol: float = 1e-5, atol: float = 1e-6, **kw) -> cir.SourceModel:
    """Import ``fn``, run it on onnxruntime and compare every output with ``fn(*args)``."""
    source = import_jax(fn, args, name=fn.__name__, **kw)
    got = _run_ort(source)
    want = [np.asarray(x) for x in jax.tree_util.tree_leaves(fn(*jax.tree_util.tree_map(jnp.asarray, args)))]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, (i, g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{fn.__name__} output {i}")
    return source


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("zoo-cache")


@pytest.fixture(scope="module")
def jax_zoo(cache) -> dict[str, cir.SourceModel]:
    return {name: zoo.load(name, cache) for name in JAX_ZOO}


# ----------------------------------------------------------------------------- the zoo models


@pytest.mark.parametrize("name", JAX_ZOO)
def test_zoo_model_matches_jax_on_onnxruntime(jax_zoo, name: str) -> None:
    source = jax_zoo[name]
    assert source.origin == "zoo" and source.framework == "jax" and zoo.framework(name) == "jax"
    assert source.native is not None and source.native.framework == "jax"
    assert source.native.input_names == list(source.example_inputs)
    got = _run_ort(source)
    want = _run_native(source.native, source.example_inputs)
    assert [g.shape for g in got] == [w.shape for w in want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    # the native program rebuilt without conversion computes the same thing
    again = _run_native(zoo.native(name), source.example_inputs)
    np.testing.assert_array_equal(again[0], want[0])


def test_zoo_models_have_named_weights_and_provenance_into_the_zoo(jax_zoo) -> None:
    lines = ZOO_JAX_FILE.read_text().splitlines()
    for name, source in jax_zoo.items():
        graph = source.model.graph
        assert [i.name for i in cir.graph_inputs(source.model)] == list(source.example_inputs)
        assert any(n.startswith("params.") for n in graph.initializers), name
        for node in graph:
            props = node.metadata_props
            where = props.get("compstack.source", "")
            match = re.match(r"^(.+):(\d+)( \S+)?$", where)
            assert match, (name, node.name, where)
            assert Path(match[1]).resolve() == ZOO_JAX_FILE, (node.name, where)
            assert 0 < int(match[2]) <= len(lines) and lines[int(match[2]) - 1].strip()
            assert re.search(rf"(^|/){props['pkg.jax.primitive']}_\d+(/|$)", node.name), node.name
            assert cir.source_of(node) == where
    names = [n.name for n in jax_zoo["jax-transformer"].model.graph]
    assert any(n.startswith("attn/dot_general") for n in names) and any(n.startswith("mlp/") for n in names)
    assert {o.name for o in jax_zoo["jax-transformer"].model.graph.outputs} == {"y"}


def test_zoo_cnn_pools_with_a_spatial_kernel(jax_zoo) -> None:
    pools = [n for n in jax_zoo["jax-cnn"].model.graph if n.op_type == "MaxPool"]
    assert len(pools) == 2
    for node in pools:
        assert list(node.attributes["kernel_shape"].value) == [2, 2]
        assert list(node.attributes["strides"].value) == [2, 2]
    convs = [n for n in jax_zoo["jax-cnn"].model.graph if n.op_type == "Conv"]
    assert sorted(n.attributes["group"].value for n in convs) == [1, 1, 16]


def test_zoo_cache_and_info(jax_zoo, cache) -> None:
    cached = zoo.load("jax-mlp", cache)
    assert cached.native is None and cached.fingerprint == jax_zoo["jax-mlp"].fingerprint
    info = zoo.info("jax-cnn", cache)
    assert info["framework"] == "jax" and info["inputs"][0]["shape"] == [2, 3, 32, 32]
    assert zoo.info("mlp", cache)["framework"] == "torch" if "torch" in sys.modules else True


def test_zoo_jax_models_do_not_import_torch(tmp_path) -> None:
    code = ("import sys\nfrom compstack.frontends import zoo\n"
            f"zoo.load('jax-mlp', {str(tmp_path)!r}); zoo.native('jax-mlp')\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


# ----------------------------------------------------------------------------- primitive coverage


X = RNG.randn(4, 6).astype(np.float32)


def test_elementwise_and_activations() -> None:
    def elementwise(x):
        y = jnp.abs(x) + 0.5
        return (jnp.exp(x), jnp.log(y), jnp.log1p(y), jnp.expm1(x), jnp.tanh(x), jax.nn.sigmoid(x), jnp.sqrt(y),
                lax.rsqrt(y), y ** 1.5, x ** 3, x ** -2, jax.scipy.special.erf(x), jnp.sign(x), jnp.floor(x),
                jnp.ceil(x), jnp.round(x * 3), lax.round(x * 3), jnp.sin(x), jnp.cos(x), jnp.maximum(x, 0.1),
                jnp.minimum(x, y), -x, jnp.where(x > 0, x, 2 * x), x == y, x != y, x < y, x <= y, x >= 0,
                (x > 0) & (y > 1), (x > 0) | (y > 1), ~(x > 0), jnp.square(x), jnp.clip(x, -0.5, 0.5),
                jax.nn.relu(x), jax.nn.gelu(x), jax.nn.gelu(x, approximate=False), lax.stop_gradient(x),
                jax.nn.softmax(x), jax.nn.log_softmax(x), x.astype(jnp.int32), lax.reduce_precision(x, 8, 7))
    _check(elementwise, (X,))


def test_integer_division_truncates_like_jax() -> None:
    def ints(a, b):
        return a // b, a % b, lax.div(a, b), lax.rem(a, b), a * b - a, a & b, a | b, ~a, a ^ b, a / 3
    a = RNG.randint(-20, 20, (5, 7)).astype(np.int32)
    b = RNG.choice([-3, -2, 2, 5], (5, 7)).astype(np.int32)
    _check(ints, (a, b))


def test_reductions_sort_and_scan() -> None:
    def reductions(x):
        return (x.sum(0), x.max(1), x.min(), x.prod(1), jnp.argmax(x, 1), jnp.argmin(x, 0), jnp.mean(x, -1),
                jnp.var(x, 0), jnp.cumsum(x, 1), jnp.any(x > 1, 1), jnp.all(x > -2, 0), jnp.sort(x, 1),
                jnp.argsort(x, 0), lax.top_k(x, 3), jax.nn.logsumexp(x, 1))
    _check(reductions, (X,))


def test_shapes_slices_and_indexing() -> None:
    def shapes(x, idx):
        return (x.reshape(3, 8), x.T, x[None], jnp.concatenate([x, x * 2], 1), x[1:3, ::2], x[::-1], x[3], x[-1],
                x[idx], x[:, idx], jnp.take(x, idx, axis=1), jnp.take(x, idx + 3, axis=0, mode="clip"),
                jnp.pad(x, ((1, 2), (0, 3)), constant_values=-1.0), lax.pad(x, 0.0, [(-1, 1, 0), (2, -2, 0)]),
                jnp.split(x, [2, 5], axis=1), jnp.arange(6) * x, jnp.broadcast_to(x[:, :1], (4, 6)),
                lax.dynamic_slice(x, (1, 2), (2, 3)), lax.dynamic_slice(x, (idx[0], 2), (2, 3)),
                jnp.tile(x, (2, 1)), jnp.stack([x, x], 1), jnp.eye(4) @ x, jnp.triu(x))
    _check(shapes, (X, np.array([3, 0, 2, 1], np.int32)))


def test_take_fill_mode_masks_out_of_range_indices() -> None:
    def take(x, idx):
        return jnp.take(x, idx, axis=0), jnp.asarray(x).at[idx].get(mode="fill", fill_value=7.0)
    source = _check(take, (X, np.array([3, 9, -2, -9], np.int32)))
    assert "Gather" in [n.op_type for n in source.model.graph]


def test_dot_general_layouts() -> None:
    def dots(a, b, c):
        return (a @ b, jnp.einsum("bqhd,bkhd->bhqk", c, c), a @ b[:, 0], a[0] @ b, jnp.outer(a[0], b[0]),
                jnp.einsum("abcd,dc->ab", c, b[:4, :2]), jnp.einsum("bqhd,bqhd->bh", c, c))
    source = _check(dots, (X, RNG.randn(6, 5).astype(np.float32), RNG.randn(2, 3, 2, 4).astype(np.float32)),
                    atol=1e-5)
    assert "Einsum" not in [n.op_type for n in source.model.graph]


def test_convolutions_and_pooling_layouts() -> None:
    def convs(x, w, wd):
        xh = x.transpose(0, 2, 3, 1)
        nchw = ("NCHW", "OIHW", "NCHW")
        return (lax.conv_general_dilated(x, w, (2, 2), ((1, 0), (2, 1)), rhs_dilation=(2, 1), dimension_numbers=nchw),
                lax.conv_general_dilated(x, wd, (1, 1), "VALID", feature_group_count=4, dimension_numbers=nchw),
                lax.conv_general_dilated(xh, w.transpose(2, 3, 1, 0), (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC")),
                lax.reduce_window(xh, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
                lax.reduce_window(x, 0.0, lax.add, (1, 1, 3, 3), (1, 1, 1, 1), ((0, 0), (0, 0), (1, 1), (1, 1))),
                lax.reduce_window(x, jnp.inf, lax.min, (1, 1, 2, 2), (1, 1, 2, 2), "VALID"),
                lax.reduce_window(x[0, 0], -jnp.inf, lax.max, (2, 2), (2, 2), "VALID"))
    x = RNG.randn(2, 4, 8, 8).astype(np.float32)
    source = _check(convs, (x, RNG.randn(6, 4, 3, 3).astype(np.float32), RNG.randn(8, 1, 3, 3).astype(np.float32)),
                    atol=1e-5)
    for node in source.model.graph:
        if node.op_type in ("MaxPool", "AveragePool"):
            assert len(node.attributes["kernel_shape"].value) == 2, node.name


# ----------------------------------------------------------------------------- names, pytrees, errors


def test_pytree_inputs_outputs_and_names() -> None:
    def model(params, x):
        with jax.named_scope("block"):
            h = jax.nn.relu(x @ params["layers"][0]["wq"])
        return {"y": h, "aux": {"total": h.sum()}, "x": x}

    params = {"layers": [{"wq": RNG.randn(6, 3).astype(np.float32)}]}
    source = _check(model, (params, X))
    assert [i.name for i in cir.graph_inputs(source.model)] == ["params.layers.0.wq", "x"]
    assert [o.name for o in source.model.graph.outputs] == ["aux.total", "x_1", "y"]
    node = next(n for n in source.model.graph if n.op_type == "MatMul")
    assert node.name == "block/dot_general_0"
    assert node.metadata_props["compstack.source"].endswith(" block")
    relu = next(n for n in source.model.graph if n.op_type == "Max")
    assert relu.name.startswith("block/relu/") and "test_frontend_jax.py:" in cir.source_of(relu)

    baked = import_jax(model, (params, X), name="m", const_argnums=(0,), input_names=["inp"],
                       output_names=["a", "b", "c"])
    assert [i.name for i in cir.graph_inputs(baked.model)] == ["inp"]
    assert "params.layers.0.wq" in baked.model.graph.initializers
    assert baked.native.input_names == ["inp"]
    np.testing.assert_allclose(_run_ort(baked)[2], _run_native(baked.native, {"inp": X})[2], rtol=1e-6)


def test_unknown_primitives_are_listed_in_one_error() -> None:
    def bad(x):
        y = lax.cummax(x, axis=0)
        z = lax.fori_loop(0, 3, lambda i, v: v * 2, x)
        return y + z

    with pytest.raises(UserError) as info:
        import_jax(bad, (X,), name="bad")
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("bad: JAX primitives ") and msg.endswith(" have no ONNX conversion")
    assert re.search(r"'cummax' at \S+test_frontend_jax\.py:\d+", msg)
    assert re.search(r"'(while|scan)' at \S+test_frontend_jax\.py:\d+", msg)

    with pytest.raises(UserError, match=r"^one: JAX primitive 'cummax' at \S+test_frontend_jax\.py:\d+ "
                                        r"has no ONNX conversion$"):
        import_jax(lambda x: lax.cummax(x, axis=0), (X,), name="one")


def test_unsupported_forms_and_bad_arguments_are_user_errors() -> None:
    with pytest.raises(UserError, match=r"^g: JAX primitive 'gather' at \S+:\d+: only take-like gathers"):
        import_jax(lambda x, i, j: x[i, j], (X, np.array([0, 1], np.int32), np.array([2, 3], np.int32)), name="g")
    with pytest.raises(UserError, match=r"^s: example argument 'x.name' is a str, not an array$"):
        import_jax(lambda x: x, ({"name": "hello"},), name="s")
    with pytest.raises(UserError, match=r"^t: tracing with jax.make_jaxpr failed: TypeError"):
        import_jax(lambda x: x + "a", (X,), name="t")
    with pytest.raises(UserError, match=r"^n: 2 input name\(s\) given for 1 input leaves"):
        import_jax(lambda x: x, (X,), name="n", input_names=["a", "b"])


# ----------------------------------------------------------------------------- file.py:function


USER_FILE = textwrap.dedent('''\
    import jax
    import jax.numpy as jnp
    import numpy as np


    def forward(params, x):
        h = jnp.tanh(x @ params["w1"] + params["b1"])
        return jax.nn.softmax(h @ params["w2"], axis=-1)


    def build():
        rng = np.random.RandomState(0)
        params = {"w1": rng.randn(16, 32).astype(np.float32), "b1": np.zeros(32, np.float32),
                  "w2": rng.randn(32, 8).astype(np.float32)}
        return forward, (params, jnp.asarray(rng.randn(4, 16).astype(np.float32)))
    ''')


@pytest.fixture
def user_file(tmp_path: Path) -> Path:
    path = tmp_path / "jaxmodel.py"
    path.write_text(USER_FILE)
    return path


def test_pyfile_returning_a_jax_function(user_file: Path) -> None:
    source = import_pyfile(f"{user_file}:build")
    assert source.name == "jaxmodel.py:build" and source.origin == "jax" and source.framework == "jax"
    assert list(source.example_inputs) == ["params.b1", "params.w1", "params.w2", "x"]
    lines = {n.metadata_props["compstack.source"] for n in source.model.graph}
    assert lines == {f"{user_file}:7", f"{user_file}:8"}
    program = native_of(f"{user_file}:build", list(source.example_inputs))
    assert program.framework == "jax"
    np.testing.assert_allclose(_run_ort(source)[0], _run_native(program, source.example_inputs)[0],
                               rtol=1e-5, atol=1e-6)


def test_pyfile_rejects_a_callable_with_non_array_inputs(tmp_path: Path) -> None:
    path = tmp_path / "notjax.py"
    path.write_text("import jax\n\ndef build():\n    return (lambda x: x), ('text',)\n")
    with pytest.raises(UserError, match=r"expected the function to return .*\(jax_function, example_args"):
        import_pyfile(f"{path}:build")


def test_cli_compare_jax_function_on_ort_and_tvm(user_file: Path, isolated_env: Path) -> None:
    pytest.importorskip("tvm")
    proc = run_cli("compare", f"{user_file}:build", "--targets", "ort-cpu,tvm-llvm", "--json",
                   "--min-runs", "3", "--min-time", "0", "--warmup", "1")
    assert proc.returncode == 0, proc.stderr
    rows = {r["target"]: r for r in json.loads(proc.stdout)["results"]}
    assert {t: r["status"] for t, r in rows.items()} == {"ort-cpu": "ok", "tvm-llvm": "ok"}, proc.stdout
