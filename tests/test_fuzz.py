"""compstack fuzz (issue #16): generator validity, equivalence rewrites, a campaign that
finds, reduces and bundles the test-only ``faulty-sin`` target, signatures, the CLI.

CI-fast: the generator and rewrite tests compile nothing; the campaign runs on
ort-cpu-based faulty targets only.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compstack import targets as registry
from compstack.analysis.ub import integer_overflow, zero_norm
from compstack.analysis.verdict import judge
from compstack.explain.graph import reference_values
from compstack.fuzz.campaign import CampaignOptions, run_campaign
from compstack.fuzz.generate import Generator
from compstack.fuzz.rewrite import REWRITES
from compstack.fuzz.signature import normalise, read_known, signature, write_known
from compstack.fuzz.specs import SPECS
from compstack.fuzz.store import FuzzStore
from conftest import TESTS

if "faulty-sin" not in registry.names():
    registry.register("faulty-sin", "faulty:WrongSinTarget")


@pytest.fixture(autouse=True)
def _workers_see_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    path = [str(TESTS), *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path))


def test_specs_cover_80_ops_with_sources() -> None:
    ops = {s.op for s in SPECS}
    assert len(ops) >= 80, len(ops)
    assert all(s.source.startswith("Operators.md#") for s in SPECS)
    assert Generator().ops() == sorted(ops)  # every spec survives the schema's type constraints


def test_generated_models_are_valid() -> None:
    """200 graphs, all dtypes: each passes the full checker, strict shape inference and runs
    on the reference evaluator; graphs use many ops and sizes up to --max-nodes."""
    gen = Generator(seed=11, max_nodes=8, symbolic=0.2)
    seen: set[str] = set()
    sizes = []
    for i in range(200):
        case = gen.case(i)
        onnx.checker.check_model(case.model, full_check=True)
        onnx.shape_inference.infer_shapes(case.model, strict_mode=True)
        ref = reference_values(case.model, case.feeds)
        for o in case.model.graph.output:
            assert o.name in ref.f64
        assert 1 <= len(case.model.graph.node) <= 8
        seen.update(case.ops)
        sizes.append(len(case.model.graph.node))
    assert gen.stats["generated"] == 200
    assert gen.stats["symbolic"] >= 20, gen.stats  # symbolic input dims for about a fifth of them
    assert len(seen) >= 80, sorted({s.op for s in SPECS} - seen)
    assert max(sizes) >= 6
    # rejected attempts are retried, never returned; they stay a small share
    assert gen.stats["rejected"] < 40, gen.stats


def test_generation_is_reproducible() -> None:
    a, b = Generator(seed=5).case(3), Generator(seed=5).case(3)
    assert a.model.SerializeToString() == b.model.SerializeToString()
    assert all(np.array_equal(a.feeds[k], b.feeds[k]) for k in a.feeds)


def test_ops_filter_and_dtypes() -> None:
    gen = Generator(seed=1, ops="Conv|Resize|Pad", dtypes=["float32"])
    assert gen.ops() == ["Conv", "Pad", "Resize"]
    for i in range(20):
        case = gen.case(i)
        assert set(case.ops) <= {"Conv", "Pad", "Resize"}
        assert all(v.dtype == np.float32 for v in case.feeds.values())


@pytest.mark.parametrize("name", sorted(REWRITES))
def test_rewrites_preserve_semantics(name: str) -> None:
    """Each rewrite, where it applies, gives the reference's outputs again (exactly, but
    for the re-association, which is within the float32 noise floor)."""
    gen = Generator(seed=3, max_nodes=6, dtypes=["float32", "int32", "bool"],
                    ops="Add|Mul|Tanh|Relu|Sub" if name == "reassociate" else None)
    rng = np.random.default_rng(0)
    applied = 0
    for i in range(60):
        case = gen.case(i)
        ref = case.ref
        new = REWRITES[name](case.model, ref, rng)
        if new is None:
            continue
        onnx.checker.check_model(new, full_check=True)
        applied += 1
        got = reference_values(new, case.feeds)
        for o_old, o_new in zip(case.model.graph.output, new.graph.output):
            a, b = np.asarray(got.f32[o_new.name]), np.asarray(ref.f32[o_old.name])
            if name == "reassociate":
                assert not judge(a, ref.f64[o_old.name], b).bad
            else:
                assert np.array_equal(a, b, equal_nan=True), (name, o_old.name)
    assert applied >= 5, applied


def test_integer_overflow_is_undefined() -> None:
    graph = helper.make_graph([helper.make_node("Mul", ["x", "c"], ["y"], name="m")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.INT8, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.INT8, [3])],
                              [numpy_helper.from_array(np.asarray([100, 2, 1], np.int8), "c")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    ref = reference_values(model, {"x": np.asarray([2, 3, 4], np.int8)})
    assert integer_overflow(model, ref.f32) == ["m: integer overflow in Mul (int8)"]
    ok = reference_values(model, {"x": np.asarray([1, 3, 4], np.int8)})
    assert integer_overflow(model, ok.f32) == []


def test_signature_normalises_and_known_files(tmp_path: Path) -> None:
    a = signature("tvm-llvm", "lower", "failed", ["Max", "Shape"], "ValueError: Node n2_Max cannot handle 3 at /x/y.py")
    b = signature("tvm-llvm", "lower", "failed", ["Shape", "Max"], "ValueError: Node n7_Max cannot handle 5 at /z.py")
    assert a == b
    assert normalise("shape [4, 3] != reference [4, 1]") == "shape [#…] != reference [#…]"
    assert normalise("However, R.multiply(lv2, in1) uses") == normalise("However, R.multiply(lv, in3) uses")
    write_known("tvm-llvm", "0.27", [(a, "a note")], tmp_path)
    assert read_known("tvm-llvm", "0.27", tmp_path) == {a}
    assert read_known("tvm-llvm", "0.28", tmp_path) == set()


def test_campaign_finds_reduces_and_bundles_faulty_sin(tmp_path: Path) -> None:
    """A short campaign over Sin-heavy graphs on faulty-sin (Sin computes Cos): the bug is
    found, reduced to the Sin node, bundled upstream-ready, deduplicated, and recorded."""
    store = FuzzStore(tmp_path / "results.sqlite")
    opts = CampaignOptions(["faulty-sin"], seed=4, budget_s=90, max_graphs=8, max_nodes=5, dtypes=["float32"],
                           ops="Sin|Tanh|Add|Mul|Relu|Neg", out_dir=tmp_path / "findings", timeout_s=60,
                           explain_budget_s=60)
    lines: list[str] = []
    record = run_campaign(opts, on_progress=lines.append, store=store)
    assert record["graphs"] == 8
    last = [ln for ln in lines if "unique finding(s)" in ln][-1]  # progress agrees with the summary
    assert last.endswith(f"{len(record['findings'])} unique finding(s)"), lines
    wrong = [f for f in record["findings"] if f["kind"] in ("wrong", "nan")]
    assert wrong, record["findings"]
    assert len({f["signature"] for f in record["findings"]}) == len(record["findings"])
    f = wrong[0]
    assert f["target"] == "faulty-sin" and f["stage"] == "compare" and f["label"] == "bug"
    assert f["ops"] == "Sin", f  # reduced to the faulty op alone
    assert f["graph"].startswith("Sin(float32")
    bundle = Path(f["bundle"])
    assert bundle.parent == tmp_path / "findings"
    for name in ("model.onnx", "ISSUE.md", "explain.json", "repro_faulty-sin.py", "test_data_set_0/input_0.pb"):
        assert (bundle / name).is_file(), name
    reduced = onnx.load(str(bundle / "model.onnx"))
    assert [n.op_type for n in reduced.graph.node] == ["Sin"]
    # later Sin graphs are repeats of the same signature, not new findings
    sin_graphs = sum(1 for i in range(8) if "Sin" in Generator(4, 5, ["float32"], "Sin|Tanh|Add|Mul|Relu|Neg").case(i).ops)
    assert sin_graphs > 1 and f["repeats"] >= 1
    rows = store.findings(record["campaign"])
    assert [r["signature"] for r in rows] == [x["signature"] for x in record["findings"]]
    camp = store.campaigns()[-1]
    assert camp["graphs"] == 8 and camp["finished"] is not None
    assert json.loads(camp["outcomes"])["faulty-sin"]["wrong@compare"] >= 1
    store.close()
    with sqlite3.connect(tmp_path / "results.sqlite") as conn:  # the tables live in the results DB
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"fuzz_campaigns", "fuzz_findings"} <= names


def test_cli_bad_input_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from compstack.cli import main

    for argv in (["fuzz", "--dtypes", "float7"], ["fuzz", "--ops", "("], ["fuzz", "--time", "soon"],
                 ["fuzz", "--jobs", "0"], ["fuzz", "--symbolic-shapes", "1.5"],
                 ["fuzz", "--report", "/nonexistent-dir"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
    with pytest.raises(SystemExit):
        main(["fuzz", "--ray-address", "auto"])
    assert "--ray-address: only with --executor ray" in capsys.readouterr().err


def test_consensus_against_the_reference_blames_no_stack() -> None:
    from compstack.explain.evaluate import EvalResult
    from compstack.fuzz.oracles import reference_suspect as _reference_suspect

    same = {"y": np.asarray([-0.667, 0.333], np.float32)}
    wrong = ("wrong", "compare", "output y", None)
    done = {t: (wrong[0], wrong[1], wrong[2], EvalResult("ok", outputs=dict(same))) for t in ("a", "b")}
    assert _reference_suspect(done)
    done["b"] = ("wrong", "compare", "", EvalResult("ok", outputs={"y": np.asarray([2.0, -1.0], np.float32)}))
    assert not _reference_suspect(done)  # they disagree with each other too
    done["b"] = ("ok", "", "", EvalResult("ok", outputs=dict(same)))
    assert not _reference_suspect(done)  # one stack agrees with the reference
    assert not _reference_suspect({"a": done["a"]})  # one stack alone never overrules the reference


def test_symbolic_shapes_keep_nodes_and_feeds() -> None:
    """--symbolic-shapes: the same graphs and feeds as with static shapes, some inputs with
    dim_param dims whose outputs carry the symbols; valid as the static ones are."""
    static, sym = Generator(seed=11, max_nodes=8), Generator(seed=11, max_nodes=8, symbolic=1.0)
    n = 0
    for i in range(20):
        a, b = static.case(i), sym.case(i)
        assert [x.SerializeToString() for x in a.model.graph.node] == [x.SerializeToString() for x in b.model.graph.node]
        assert all(np.array_equal(a.feeds[k], b.feeds[k]) for k in a.feeds)
        params = {d.dim_param for x in b.model.graph.input for d in x.type.tensor_type.shape.dim if d.dim_param}
        if params:
            n += 1
            assert all(p[0] == "d" and int(p[1:]) > 1 for p in params)
            for o in b.model.graph.output:  # the reference computes the static model's outputs
                assert np.shape(b.ref.f32[o.name]) == np.shape(a.ref.f32[o.name])
                np.testing.assert_array_equal(b.ref.f64[o.name], a.ref.f64[o.name])
    assert n >= 10 and sym.stats["symbolic"] == n, sym.stats


def test_ray_executor_gives_the_local_outcomes() -> None:
    """A seeded 3-graph campaign on ort-cpu has the same outcomes and findings with graphs
    evaluated by two Ray actors as locally (skipped when Ray cannot start here)."""
    pytest.importorskip("ray")
    from compstack.core.errors import UserError

    kw = dict(seed=3, budget_s=600, max_graphs=3, max_nodes=5, reduce=False, equivalence=1.0, timeout_s=60)
    local = run_campaign(CampaignOptions(["ort-cpu"], **kw))  # type: ignore[arg-type]
    try:
        remote = run_campaign(CampaignOptions(["ort-cpu"], executor="ray", workers=2, **kw))  # type: ignore[arg-type]
    except UserError as exc:
        pytest.skip(f"Ray cannot start here: {exc}")
    assert local["graphs"] == remote["graphs"] == 3
    assert remote["outcomes"] == local["outcomes"]
    assert sum(local["outcomes"]["ort-cpu"].values()) >= 3  # every graph counted (and its rewrite)
    assert [f["signature"] for f in remote["findings"]] == [f["signature"] for f in local["findings"]]
    assert remote["executor"]["workers"] == 2 and sum(remote["executor"]["hosts"].values()) == 3
    assert local["executor"] == {"name": "local"}
    if not local["findings"]:  # no -o and nothing found: no empty compstack-fuzz-* folder is left behind
        assert local["out_dir"] == ""


def test_zero_norm_is_undefined() -> None:
    """LpNormalization of an all-zero vector is 0/0: undefined, not a finding to blame."""
    node = helper.make_node("LpNormalization", ["x"], ["y"], name="n0", axis=1)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    assert zero_norm(m, {"x": np.asarray([[0, 0, 0], [1, 2, 2]], np.float32)}) == [
        "n0: LpNormalization of an all-zero vector (0/0)"]
    assert zero_norm(m, {"x": np.asarray([[0, 0, 1], [1, 2, 2]], np.float32)}) == []
    assert zero_norm(m, {"x": np.asarray([[0, 1, 0], [0, 2, 0]], np.float32)}) == []  # zero columns, axis 1 rows


def test_targets_side_by_side_give_the_one_at_a_time_outcomes() -> None:
    """``--jobs 2`` locally (issue #29): the targets of each graph are evaluated at once,
    each in its own worker; outcomes, findings and their order are those of one at a time."""
    kw = dict(seed=5, budget_s=600, max_graphs=6, max_nodes=5, reduce=False, equivalence=1.0, timeout_s=60)
    targets = ["ort-cpu", "faulty-sin", "openvino-cpu"]
    one = run_campaign(CampaignOptions(targets, **kw))  # type: ignore[arg-type]
    two = run_campaign(CampaignOptions(targets, parallel=2, **kw))  # type: ignore[arg-type]
    assert one["graphs"] == two["graphs"] == 6
    assert two["outcomes"] == one["outcomes"]
    assert [f["signature"] for f in two["findings"]] == [f["signature"] for f in one["findings"]]
    assert all(sum(v.values()) >= 6 for v in one["outcomes"].values())


def test_ctrl_c_keeps_the_record_and_bundles_what_was_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C during generation (issue #29's two phases): run_campaign returns the record so
    far, marked interrupted, and every failure found is bundled as found, with NOT_REDUCED.md."""
    from compstack.fuzz import campaign as C

    real_step = C._Campaign.step

    def step(self: C._Campaign, index: int, active: list[str]) -> None:
        if index == 6:
            raise KeyboardInterrupt
        real_step(self, index, active)

    monkeypatch.setattr(C._Campaign, "step", step)
    opts = CampaignOptions(["faulty-sin"], seed=4, budget_s=90, max_graphs=8, max_nodes=5, dtypes=["float32"],
                           ops="Sin|Tanh|Add|Mul|Relu|Neg", out_dir=tmp_path / "f", timeout_s=60)
    record = run_campaign(opts)
    assert record["interrupted"] is True and record["graphs"] == 6
    assert record["findings"], record["outcomes"]
    for f in record["findings"]:
        assert f["attribution"] == "not reduced: the campaign was interrupted"
        bundle = Path(f["bundle"])
        assert {"model.onnx", "inputs.npz", "NOT_REDUCED.md"} <= {p.name for p in bundle.iterdir()}
        assert "compstack explain" in (bundle / "NOT_REDUCED.md").read_text()
