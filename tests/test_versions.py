"""Stack releases as targets (issue #25): ``TARGET@VERSION`` specs, envs in the store,
``compstack versions``, ``compstack bisect-versions``.

The default tests need no registry: spec parsing, the env recipe, the env entry's
manifest logic on a real store, the search's cost bound, and the one-line errors. The
``slow`` tests provision real onnxruntime releases from the registry (uv) and show a real
difference between two of them: a model with the opset-20 ``Gelu`` op, which
onnxruntime 1.16.3 refuses to load (it knows opsets up to 19) and 1.17.0 runs.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from compstack import targets as registry
from compstack.core.envs import env_key, find_env, list_envs, pip_sources, split_spec
from compstack.core.errors import UnavailableError, UserError
from compstack.core.store import Store
from compstack.explain.versions import VersionBisect, _search, pick_range, write_issue
from compstack.run.jobs import JobOutcome, outcome_to_json
from compstack.run.releases import check_version
from compstack.targets.releases import recipe
from conftest import run_cli, said


def _gelu(path: Path) -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    g = helper.make_graph([helper.make_node("Gelu", ["x"], ["y"])], "gelu", [x], [y])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), str(path))
    return path


# ---- default: no registry ---------------------------------------------------------------

def test_versioned_specs_resolve_and_bad_ones_are_one_line() -> None:
    assert registry.resolve("ort-cpu@1.20.0,ort-cpu,ort-cpu@1.20.0") == ["ort-cpu@1.20.0", "ort-cpu"]
    assert registry.split("ort-cpu@1.24.1") == ("ort-cpu", "1.24.1")
    assert registry.ref("ort-cpu@1.24.1") == registry.ref("ort-cpu")
    assert registry.get("ort-cpu@1.24.1") is registry.get("ort-cpu")
    with pytest.raises(UserError, match="NAME@VERSION"):
        registry.resolve("ort-cpu@")
    with pytest.raises(UserError, match="no versioned form"):
        registry.resolve("tensorrt@10.0")
    with pytest.raises(UserError, match="unknown target 'nosuch@1.0'"):
        registry.resolve("nosuch@1.0")
    assert split_spec("iree-llvm-cpu@3.0.0rc1") == ("iree-llvm-cpu", "3.0.0rc1")


def test_recipe_pins_the_stack_and_numpy_1_for_old_ort() -> None:
    old, new = recipe("ort-cpu", "1.18.1"), recipe("ort-cpu", "1.19.0")
    assert old.requirements[:2] == ("onnxruntime==1.18.1", "numpy<2")
    assert new.requirements[:2] == ("onnxruntime==1.19.0", "numpy")
    iree = recipe("iree-llvm-cpu", "3.6.0")
    assert iree.requirements[:2] == ("iree-base-compiler==3.6.0", "iree-base-runtime>=3.6.0,<=3.6.0")
    # the registry has compiler 3.7.1 and no runtime 3.7.1: the newest 3.7 runtime up to it
    assert recipe("iree-llvm-cpu", "3.7.1").requirements[1] == "iree-base-runtime>=3.7.0,<=3.7.1"
    assert recipe("iree-llvm-cpu", "3.0.0rc1").requirements[1] == "iree-base-runtime==3.0.0rc1"
    # 0.25 loads only with ffi 0.1.12 (it requires >=0.1.12; 0.1.13+ lack a symbol); later ones get the parent pin
    assert "apache-tvm-ffi==0.1.12" in recipe("tvm-llvm", "0.25.0.post1").requirements
    assert "apache-tvm-ffi==0.1.14.post0" in recipe("tvm-llvm", "0.27.0").requirements
    assert "onnx==1.23.2" in old.requirements


def test_env_entry_is_used_only_when_published_and_intact(tmp_path: Path) -> None:
    """A half-built env (a ``.tmp-*`` folder) is never found; a published one is, with
    the versions of its manifest; a corrupted file evicts it."""
    store = Store(tmp_path)
    rec = recipe("ort-cpu", "1.20.0")
    staging = store.staging("envs")
    (staging / "bin").mkdir()
    (staging / "bin" / "python").symlink_to(sys.executable)
    (staging / "lib.txt").write_text("site-packages stand-in\n")
    assert find_env(store, rec, "1.20.0") is None
    assert list(list_envs(store)) == []
    store.publish(staging, "envs", env_key("ort-cpu", "1.20.0", rec.requirements),
                  meta={"stack": "ort-cpu", "version": "1.20.0", "versions": {"onnxruntime": "1.20.0"}, "tool": "uv"})
    info = find_env(store, rec, "1.20.0")
    assert info is not None and info.versions == {"onnxruntime": "1.20.0"}
    assert info.python == info.path / "bin" / "python"
    assert [e["version"] for e in list_envs(store, "ort-cpu")] == ["1.20.0"]
    assert store.info()["envs"]["entries"] == 1
    from compstack.core import envs

    envs._VERIFIED.clear()
    (info.path / "lib.txt").write_text("changed after publish\n")
    assert find_env(store, rec, "1.20.0") is None
    assert not info.path.exists()


def test_worker_refuses_a_stack_of_another_release() -> None:
    check_version("ort-cpu@1.20.0", {"onnxruntime": "1.20.0"})
    check_version("ort-cpu", {"onnxruntime": "1.32.0"})
    with pytest.raises(UnavailableError, match="imported onnxruntime 1.32.0, not 1.20.0"):
        check_version("ort-cpu@1.20.0", {"onnxruntime": "1.32.0"})


class _NoCopyStr(str):
    """Like TVM 0.25's ``tvm_ffi.core.String``: a ``str`` subclass that must never be copied."""

    def __reduce_ex__(self, protocol: object) -> object:
        raise AssertionError("copied")


def test_outcome_json_never_copies_a_stacks_values() -> None:
    # A release's worker writes values its stack made (TVM 0.25's llvm_get_system_cpu()
    # is a tvm_ffi String); dataclasses.asdict deep-copied them and the worker segfaulted.
    out = JobOutcome(target="tvm-llvm@0.25.0", flags={"target": {"mcpu": _NoCopyStr("znver3"), "n": [1, 2.5]}},
                     extra={"ok": True})
    back = JobOutcome.from_json(json.loads(outcome_to_json(out)))
    assert back.flags == {"target": {"mcpu": "znver3", "n": [1, 2.5]}} and back.extra == {"ok": True}
    assert type(back.flags["target"]["mcpu"]) is str


@pytest.mark.parametrize("n,flip,skip", [(36, 13, set()), (16, 1, {3, 4}), (2, 1, set()), (9, 8, {7})])
def test_search_finds_the_flip_within_log2_plus_2(n: int, flip: int, skip: set[int]) -> None:
    calls: list[int] = []

    def evaluate(i: int) -> bool | None:
        if i not in calls:
            calls.append(i)
        return None if i in skip else i >= flip

    out = VersionBisect("ort-cpu", [str(i) for i in range(n)])
    _search(evaluate, n, out)
    evaluated = [i for i in calls if i not in skip]
    assert out.answer == "flip" and out.direction == "regression"
    assert (out.before, out.after) == (str(max(i for i in range(flip) if i not in skip)), str(flip))
    assert len(evaluated) <= math.ceil(math.log2(n)) + 2


def test_search_answers_same_everywhere() -> None:
    out = VersionBisect("ort-cpu", [str(i) for i in range(10)])
    _search(lambda i: True, 10, out)
    assert out.answer == "bad-all"


def test_pick_range_uses_the_listed_order() -> None:
    listed = ["1.16.3", "1.17.0", "1.17.1", "1.17.3", "1.18.0"]  # as the registry lists them (no 1.17.2)
    assert pick_range(listed, "1.17.0..1.17.3") == ["1.17.0", "1.17.1", "1.17.3"]
    assert pick_range(listed, "..1.17.0") == ["1.16.3", "1.17.0"]
    with pytest.raises(UserError, match="1.17.2 is not a release"):
        pick_range(listed, "1.17.2..")
    with pytest.raises(UserError, match="FIRST..LAST"):
        pick_range(listed, "1.17.0")


def test_issue_section_replaces_an_earlier_one(tmp_path: Path) -> None:
    (tmp_path / "ISSUE.md").write_text("# Wrong result\n\n## Model\n\nx\n")
    b = VersionBisect("ort-cpu", ["1.16.3", "1.17.0"], answer="flip", before="1.16.3", after="1.17.0",
                      direction="fix", summary="ort-cpu: last bad 1.16.3, first good 1.17.0: fixed in 1.17.0")
    write_issue(tmp_path, b)
    write_issue(tmp_path, b)
    text = (tmp_path / "ISSUE.md").read_text()
    assert text.count("## Releases") == 1 and "fixed in 1.17.0" in text and text.startswith("# Wrong result")


def test_pip_sources_are_pips_own() -> None:
    import subprocess

    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    src = pip_sources()
    for url in src["extra_index_urls"] + src["find_links"]:
        assert url in listed


def test_cli_bad_release_specs_exit_2_in_one_line(tmp_path: Path) -> None:
    model = _gelu(tmp_path / "gelu.onnx")
    for args in (("compare", str(model), "--targets", "ort-cpu@not a version"),
                 ("versions", "tensorrt"),
                 ("versions", "ort-cpu@9.9.9"),
                 ("versions", "ort-cpu", "--provision", " , "),
                 ("bisect-versions", str(model), "--target", "tensorrt", "--range", "1.0..2.0"),
                 ("versions", "cpu"),  # an alias: say it names several stacks (it had said "did you mean cpu")
                 ("compare", str(model), "--targets", "cpu@1.0"),
                 ("sweep", "--last", "--cache-max-size", "1G"),  # a flag of running a sweep, with --last
                 ("sweep", "--matrix", str(model))):
        res = run_cli(*args, env={"COMPSTACK_CACHE_DIR": str(tmp_path / "cache"), "COMPSTACK_DB": str(tmp_path / "d")})
        assert res.returncode == 2, (args, res.stderr)
        assert len(said(res.stderr)) == 1 and "Traceback" not in res.stderr
        assert "did you mean cpu" not in res.stderr and "sweep --last: give" not in res.stderr, res.stderr


def test_explain_and_fuzz_versions_bad_input_is_one_line(tmp_path: Path) -> None:
    """--versions is checked before any work: it needs a bundle (explain -o, fuzz without
    --no-reduce) and a target whose stack has releases; each mistake is one named line."""
    model = _gelu(tmp_path / "gelu.onnx")
    env = {"COMPSTACK_CACHE_DIR": str(tmp_path / "cache"), "COMPSTACK_DB": str(tmp_path / "r.sqlite")}
    for args, says in ((("explain", str(model), "--targets", "ort-cpu", "--versions", "1.16.0..1.17.1"), "needs -o"),
                       (("explain", str(model), "--targets", "xla-cpu", "-o", str(tmp_path / "b"), "--versions",
                         "1.0.0..2.0.0"), "none of the targets has releases"),
                       (("fuzz", "--targets", "ort-cpu", "--graphs", "1", "--no-reduce", "--versions", ".."),
                        "not with --no-reduce")):
        res = run_cli(*args, env=env)
        assert res.returncode == 2, (args, res.stderr)
        lines = said(res.stderr)
        assert len(lines) == 1 and "--versions" in lines[0] and says in lines[0], (args, res.stderr)
    assert not (tmp_path / "b").exists()


# ---- slow: real releases from the registry ------------------------------------------------

@pytest.fixture(scope="module")
def release_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("release-store")


@pytest.mark.slow
def test_two_ort_releases_differ_on_opset_20_gelu(release_store: Path, tmp_path: Path) -> None:
    """onnxruntime 1.16.3 does not load an opset-20 model; 1.17.0 runs its Gelu right.
    Rows record the version read inside each env; the stack beside compstack still runs."""
    model = _gelu(tmp_path / "gelu.onnx")
    env = {"COMPSTACK_CACHE_DIR": str(release_store), "COMPSTACK_DB": str(tmp_path / "r.sqlite"),
           "COMPSTACK_EXECUTOR": "process"}
    res = run_cli("compare", str(model), "--targets", "ort-cpu@1.16.3,ort-cpu@1.17.0,ort-cpu@1.17.2", "--json",
                  env=env)
    assert res.returncode in (0, 1), res.stderr
    rows = {r["target"]: r for r in json.loads(res.stdout)["results"]}
    old, new, missing = rows["ort-cpu@1.16.3"], rows["ort-cpu@1.17.0"], rows["ort-cpu@1.17.2"]
    assert old["versions"]["onnxruntime"] == "1.16.3" and new["versions"]["onnxruntime"] == "1.17.0"
    assert old["status"] == "failed" and "opset" in old["error"].lower()
    assert new["status"] == "ok"
    assert missing["status"] == "unavailable" and "1.17.2" in missing["error"]
    envs = {e["version"]: e for e in list_envs(Store(release_store), "ort-cpu")}
    assert set(envs) == {"1.16.3", "1.17.0"} and all(e["bytes"] > 10_000_000 for e in envs.values())
    doc = json.loads(run_cli("versions", "ort-cpu", "--json", env=env).stdout)
    assert {"1.16.3", "1.17.0"} <= set(doc["releases"]) and "1.17.2" not in doc["releases"]
    assert "1.17.2" in doc["failed"]


@pytest.mark.slow
def test_bisect_versions_finds_the_release_that_loads_opset_20(release_store: Path, tmp_path: Path) -> None:
    model = _gelu(tmp_path / "gelu.onnx")
    env = {"COMPSTACK_CACHE_DIR": str(release_store), "COMPSTACK_DB": str(tmp_path / "r.sqlite")}
    res = run_cli("bisect-versions", str(model), "--target", "ort-cpu", "--range", "1.16.0..1.17.1", "--json",
                  env=env)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert (doc["answer"], doc["before"], doc["after"], doc["direction"]) == ("flip", "1.16.3", "1.17.0", "fix")
    assert doc["evaluations"] <= math.ceil(math.log2(len(doc["releases"]))) + 2
    assert doc["tried"]["1.16.0"] == "bad" and doc["tried"]["1.17.1"] == "good"
    assert doc["releases"][0] == "1.16.0" and doc["releases"][-1] == "1.17.1"


@pytest.mark.slow
def test_explain_versions_bisects_the_bundles_finding(release_store: Path, tmp_path: Path) -> None:
    """explain --versions: the bundle of ort-cpu@1.16.3's failure on an opset-20 model gets
    the release where it went away, in its ISSUE.md and in the report."""
    model = _gelu(tmp_path / "gelu.onnx")
    env = {"COMPSTACK_CACHE_DIR": str(release_store), "COMPSTACK_DB": str(tmp_path / "r.sqlite")}
    bundle = tmp_path / "bug"
    res = run_cli("explain", str(model), "--targets", "ort-cpu@1.16.3", "-o", str(bundle),
                  "--versions", "1.16.0..1.17.1", "--json", env=env)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["found"] and doc["target"] == "ort-cpu@1.16.3"
    v = doc["versions"]
    assert (v["answer"], v["before"], v["after"], v["direction"]) == ("flip", "1.16.3", "1.17.0", "fix")
    assert v["evaluations"] <= math.ceil(math.log2(len(v["releases"]))) + 2
    issue = (bundle / "ISSUE.md").read_text(encoding="utf-8")
    assert "## Releases" in issue and "1.17.0" in issue and v["issue"] == str(bundle / "ISSUE.md")


@pytest.mark.slow
def test_conformance_runs_each_release_in_its_env(release_store: Path, tmp_path: Path) -> None:
    """conformance takes versioned targets: the ONNX node test of opset-20 Gelu fails to load
    on ort-cpu@1.16.3 and passes on 1.17.0, each row with its release and fault."""
    env = {"COMPSTACK_CACHE_DIR": str(release_store), "COMPSTACK_DB": str(tmp_path / "r.sqlite")}
    res = run_cli("conformance", "--targets", "ort-cpu@1.16.3,ort-cpu@1.17.0", "--filter", "^test_gelu_default_1$",
                  "--json", env=env)
    doc = json.loads(res.stdout)
    targets = {t["target"]: t for t in doc["targets"]}
    assert (targets["ort-cpu@1.16.3"]["version"], targets["ort-cpu@1.17.0"]["version"]) == ("1.16.3", "1.17.0")
    cases = {c["target"]: c for c in doc["cases"]}
    assert cases["ort-cpu@1.17.0"]["status"] == "passed"
    old = cases["ort-cpu@1.16.3"]
    assert old["status"] != "passed" and "opset" in old["error"].lower() and old["fault"] == "stack", old


@pytest.mark.slow
def test_a_release_not_listed_is_refused_before_any_build(tmp_path: Path) -> None:
    """A spelling the registry does not list (``0.25`` for ``0.25.0``) would build a second
    env of the same release; a release that does not exist gave uv's resolver text. Both are
    one line, before any env is built, and nothing is written outside --cache-dir."""
    model = _gelu(tmp_path / "gelu.onnx")
    home = tmp_path / "home"
    cache = tmp_path / "cache"
    for spec, says in (("tvm-llvm@0.25", "give the release as the registry lists it: tvm-llvm@0.25.0"),
                       ("tvm-llvm@9.9.9", "apache-tvm 9.9.9 is not on the registry")):
        res = run_cli("compare", str(model), "--targets", spec, "--no-latency", "--cache-dir", str(cache),
                      env={"HOME": str(home), "COMPSTACK_CACHE_DIR": ""})
        assert res.returncode == 2 and says in res.stderr and len(said(res.stderr)) == 1, res.stderr
    res = run_cli("compare", str(model), "--targets", "ort-cpu", "--reference", "tvm-llvm@9.9.9", "--no-latency",
                  "--cache-dir", str(cache), env={"HOME": str(home), "COMPSTACK_CACHE_DIR": ""})
    assert res.returncode == 2 and "--reference tvm-llvm@9.9.9: apache-tvm 9.9.9 is not on" in res.stderr, res.stderr
    assert not (cache / "envs").exists() or not [p for p in (cache / "envs").iterdir() if p.name.startswith("tvm")]
    assert not (home / ".cache" / "compstack").exists()
    res = run_cli("versions", "tvm-llvm", "--json", "--cache-dir", str(cache))
    assert res.returncode == 0 and json.loads(res.stdout)["releases"][0] == "0.25.0", res.stderr
