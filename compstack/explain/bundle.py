"""The bundle: a folder ready to attach to an upstream issue.

Layout (``compstack explain ... -o DIR``)::

    model.onnx                        the reduced model
    test_data_set_0/input_N.pb        its inputs (TensorProto), as the ONNX backend tests
    test_data_set_0/output_N.pb       the float64 reference's outputs, in the declared dtypes
    inputs.npz                        the same inputs by name
    outputs/<target>.npz              each target's outputs
    stages/<target>/                  the stages of each target for the reduced model
    artifact/<target>/                each target's compiled artifact (where it has one)
    repro_<target>.py                 standalone reproducer (the stack's own API only)
    versions.json, flags.json         every stack's versions and how it was run
    explain.json                      the whole explanation (verdicts, bisect, reduction, attribution)
    ISSUE.md                          title, environment, steps, expected vs actual, attribution

``compstack explain --replay DIR`` runs the bundle's model again on each target and
says whether the discrepancy still reproduces.
"""

from __future__ import annotations

import json
import platform
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from compstack.core.duration import figure
from compstack.core.sanitize import terminal, terminal_lines
from compstack.explain.graph import Piece, feeds_for

__all__ = ["BUNDLE_ENTRIES", "check_bundle_dir", "write_bundle", "read_bundle"]

#: What a bundle folder holds: the only entries a new bundle replaces in an old one.
BUNDLE_ENTRIES = ("model.onnx", "test_data_set_0", "inputs.npz", "outputs", "stages", "artifact", "versions.json",
                  "flags.json", "explain.json", "ISSUE.md")


def check_bundle_dir(folder: Path) -> None:
    """``-o DIR`` must be new, empty, or an earlier bundle (only its bundle entries are
    replaced): a folder with anything else in it is never touched.

    Raises:
        UserError: ``folder`` is a file, or a non-empty folder that is not a bundle.
    """
    from compstack.core.errors import UserError

    if folder.exists() and not folder.is_dir():
        raise UserError(f"-o {folder}: not a folder")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / "explain.json").is_file():
        raise UserError(f"-o {folder}: the folder is not empty and holds no earlier bundle; give a new or empty "
                        "folder (nothing in it was touched)")


def _clear(folder: Path) -> None:
    """Remove an earlier bundle's entries (and its repro scripts), nothing else."""
    for name in BUNDLE_ENTRIES:
        p = folder / name
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        elif p.exists() or p.is_symlink():
            p.unlink()
    for p in folder.glob("repro_*.py"):
        p.unlink()


def _tensor_files(folder: Path, prefix: str, arrays: list[tuple[str, np.ndarray]]) -> None:
    for i, (name, arr) in enumerate(arrays):
        t = numpy_helper.from_array(np.asarray(arr), name)
        (folder / f"{prefix}_{i}.pb").write_bytes(t.SerializeToString())


def write_bundle(folder: Path, explainer: Any, p: Piece, report: dict[str, Any]) -> dict[str, Any]:
    """Write the bundle of the reduced piece ``p`` into ``folder`` (replaced).

    Args:
        folder: the output folder.
        explainer: the :class:`compstack.explain.core.Explainer`.
        p: the reduced piece.
        report: the explanation so far (verdicts, bisect, reduce, attribution); saved
            as ``explain.json`` and used for ISSUE.md.

    Returns:
        ``{"folder", "files", "repros": {target: file or why none}}``.

    Raises:
        OSError: the folder cannot be written.
    """
    from compstack import targets as registry
    from compstack.core.version import __version__
    from compstack.explain.repro import repro_script

    check_bundle_dir(folder)
    if folder.exists():
        _clear(folder)
    (folder / "test_data_set_0").mkdir(parents=True)
    ref = explainer.ref
    onnx.save(p.model, str(folder / "model.onnx"))
    feeds = feeds_for(p, ref)
    np.savez(folder / "inputs.npz", **feeds)  # type: ignore[arg-type]  # numpy stubs: ** may bind allow_pickle
    _tensor_files(folder / "test_data_set_0", "input", [(n, feeds[n]) for n in p.inputs])
    expected = [(o, np.asarray(ref.f64[o]).astype(ref.dtypes.get(o, ref.f64[o].dtype))) for o in p.outputs]
    _tensor_files(folder / "test_data_set_0", "output", expected)
    versions: dict[str, Any] = {"compstack": __version__, "python": platform.python_version(),
                                "onnx": onnx.__version__, "numpy": np.__version__, "machine": platform.machine()}
    flags: dict[str, Any] = {}
    repros: dict[str, str] = {}
    (folder / "outputs").mkdir()
    for target in explainer.all_targets:
        run = explainer.run_for(target)
        info = explainer.evaluator.info(run)
        versions[target] = info.get("versions", {})
        flags[target] = {"options": dict(run.options), "flags": info.get("flags", {})}
        res = explainer.evaluator.run(run, p.model, feeds, stages=folder / "stages" / target,
                                      artifact=folder / "artifact" / target)
        if res.status == "ok":
            np.savez(folder / "outputs" / f"{target}.npz", **res.outputs)
        cls = registry.get(target)
        title = report.get("title", f"{target} disagrees with the ONNX reference")
        script = repro_script(getattr(cls, "stack", ""), info.get("flags", {}), title, explainer.rtol,
                              explainer.atol)
        if script is None:
            repros[target] = f"no standalone template for stack {getattr(cls, 'stack', '?')!r}"
            continue
        name = f"repro_{target}.py"
        if getattr(cls, "stack", "") == "xla":  # the repro loads the exported program from artifact/
            shutil.copytree(folder / "artifact" / target, folder / "artifact", dirs_exist_ok=True)
        (folder / name).write_text(script)
        repros[target] = name
    (folder / "versions.json").write_text(json.dumps(versions, indent=1, sort_keys=True, default=str))
    (folder / "flags.json").write_text(json.dumps(flags, indent=1, sort_keys=True, default=str))
    report = {**report, "repros": repros}
    (folder / "explain.json").write_text(json.dumps(report, indent=1, default=str))
    (folder / "ISSUE.md").write_text(_issue(report, p, versions, flags, repros))
    files = sorted(str(f.relative_to(folder)) for f in folder.rglob("*") if f.is_file())
    return {"folder": str(folder), "files": files, "repros": repros}


def _issue(report: dict[str, Any], p: Piece, versions: dict[str, Any], flags: dict[str, Any],
           repros: dict[str, str]) -> str:
    target = report.get("target", "")
    t = terminal  # every name from the model, on one line and inert (core.sanitize)
    lines = [f"# {t(report.get('title', 'Wrong result'))}", "",
             "## Environment", ""]
    lines += [f"- {k}: {v}" for k, v in versions.items() if not isinstance(v, dict)]
    for tg, v in versions.items():
        if isinstance(v, dict):
            lines.append(f"- {tg}: " + ", ".join(f"{k} {x}" for k, x in v.items()))
    ops = ", ".join(t(n.op_type) for n in p.model.graph.node)
    lines += ["", "## Model", "",
              f"`model.onnx`: {len(p.model.graph.node)} node(s) ({ops}), reduced by compstack from "
              f"{report.get('reduce', {}).get('nodes_before', '?')} nodes of `{t(report.get('model', '?'))}`; "
              "its inputs are the values the original model computed at the cut"
              + (", then simplified while the discrepancy held: " + "; ".join(map(t, report["simplify"]["steps"]))
                 if (report.get("simplify") or {}).get("steps") else "") + ".", "",
              "## Steps to reproduce", ""]
    for tg, r in repros.items():
        lines.append(f"- `python {r}`" if r.endswith(".py") else f"- {tg}: {t(r)}")
    lines += ["", "## Expected vs actual", "",
              "Expected: the outputs in `test_data_set_0/output_*.pb` (ONNX reference evaluator, float64).", ""]
    for tg, verdicts in (report.get("reduced_verdicts") or report.get("verdicts", {})).items():
        for o, v in verdicts.items():
            figures = "" if v.get("kind") == "shape" else (  # a shape or dtype mismatch has no error figures
                f" (max abs error {figure(v.get('max_abs'))}, RMSE {figure(v.get('rmse'))}, "
                f"float32 noise floor {figure(v.get('floor'))})")
            lines.append(f"- {tg} `{t(o)}`: {v.get('kind')}{figures} {t(v.get('detail', ''))}")
    att = report.get("attribution") or {}
    if att:
        lines += ["", "## Attribution", "", t(att.get("summary", ""))]
        lines += [f"- {c['run']}: {'still wrong' if c['holds'] else 'right' if c['holds'] is False else c['status']}"
                  f" ({t(c['detail'])})" for c in att.get("checks", [])]
    b = report.get("bisect") or {}
    if b.get("node"):
        lines += ["", "## Where", "",
                  f"First divergent node: `{t(b['node']['name'] or b['node']['op_type'])}` ({t(b['node']['op_type'])}); "
                  + (f"wrong when run alone on the reference inputs ({op_cause(att)})." if b.get("kind") == "op" else
                     "right when run alone, wrong in the full graph (an interaction: fusion or optimisation).")]
    lines += ["", f"Flags: `{json.dumps(flags.get(target, {}), default=str)[:500]}`", "",
              "Generated by `compstack explain`.", ""]
    return terminal_lines("\n".join(lines))


def read_bundle(folder: Path) -> dict[str, Any]:
    """The bundle's model, inputs, expected outputs and the targets it was made for.

    Raises:
        UserError: not a bundle (names what is missing).
    """
    from compstack.core.errors import UserError

    for need in ("model.onnx", "inputs.npz", "explain.json", "flags.json"):
        if not (folder / need).is_file():
            raise UserError(f"{folder}: not a compstack explain bundle (no {need})")
    try:
        report = json.loads((folder / "explain.json").read_text())
        flags = json.loads((folder / "flags.json").read_text())
        model = onnx.load(str(folder / "model.onnx"))
        onnx.checker.check_model(model)
        with np.load(folder / "inputs.npz", allow_pickle=False) as data:
            feeds = {k: data[k] for k in data.files}
    except Exception as exc:  # noqa: BLE001 - protobuf DecodeError, checker errors, zip errors: all "unreadable"
        raise UserError(f"{folder}: unreadable bundle ({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''})") from None
    if not isinstance(flags, dict) or not isinstance(report, dict) or not flags \
            or not all(isinstance(k, str) and isinstance(v, dict) and isinstance(v.get("options", {}), dict)
                       for k, v in flags.items()):
        raise UserError(f"{folder}: malformed bundle (flags.json must map each target to its options)")
    return {"model": model, "feeds": feeds, "report": report, "flags": flags}


def op_cause(att: dict[str, Any]) -> str:
    """Why a node is wrong alone: the precision option the user chose when the attribution
    found it (``att``: explain's ``report["attribution"]``, ``{}`` when there is none), else
    an op bug. The CLI line, the title and ISSUE.md all say it with this function."""
    knob = att.get("knob") if att.get("culprit") == "precision" else ""
    return f"the precision option you chose: {knob}" if knob and "=" in str(knob) else "an op bug"
