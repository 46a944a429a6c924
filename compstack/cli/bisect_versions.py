"""``compstack bisect-versions SOURCE --target T --range A..B``: the release where a
finding appears (or goes away), by binary search over the stack's ordered releases
(:func:`compstack.explain.versions.bisect_versions`).

SOURCE is an explain or fuzz bundle folder (its ``model.onnx`` and ``inputs.npz``; the
answer goes into its ``ISSUE.md``) or a model (``--inputs NPZ``, else generated inputs).
Exit status: 0 when the property flips inside the range, 1 when it is the same in every
release tried, 2 on bad input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from compstack.cli.common import load_source, parse_target_options
from compstack.core.errors import UserError
from compstack.core.sanitize import terminal  # a bundle's names in progress lines: inert

__all__ = ["bisect_bundle", "bisect_versions", "version_ranges"]


def _model_and_feeds(source: str, inputs: str | None, seed: int) -> tuple[Any, dict[str, Any], Path | None]:
    """``(proto, feeds, bundle folder or None)`` of SOURCE."""
    folder = Path(source)
    if folder.is_dir():
        from compstack.explain.bundle import read_bundle

        b = read_bundle(folder)
        return b["model"], b["feeds"], folder
    from compstack.api import explain_feeds
    from compstack.core import ir as cir
    from compstack.core.inputs import load_npz

    src = load_source(source, None)
    feeds = explain_feeds(src, inputs=load_npz(inputs) if inputs else None, seed=seed)
    return cir.to_proto(src.model), feeds, None


def _releases(target: str, spec: str) -> tuple[str, list[str]]:
    from compstack import targets as registry
    from compstack.core.envs import EnvError, registry_releases
    from compstack.explain.versions import pick_range
    from compstack.targets.releases import RELEASES

    base = target.partition("@")[0]
    registry.ref(base)  # unknown target: one line
    if base not in RELEASES:
        raise UserError(f"--target {target}: no versioned form (versioned targets: {', '.join(RELEASES)})")
    try:
        listed = registry_releases(RELEASES[base].package)
    except EnvError as exc:
        raise UserError(f"--target {target}: {exc}") from None
    return base, pick_range(listed, spec)


def version_ranges(targets: list[str], spec: str, flag: str = "--versions") -> dict[str, list[str]]:
    """``{stack target: its releases in spec}`` for each of ``targets`` that has releases
    (``ort-cpu@1.20.0`` counts as ``ort-cpu``), read from the registry now so that a bad
    range fails before any work (explain and fuzz ``--versions RANGE``).

    Raises:
        UserError: no target has a versioned form, the registry cannot be read, or
            ``spec`` is not ``FIRST..LAST`` over listed releases.
    """
    from compstack.targets.releases import RELEASES

    bases = list(dict.fromkeys(t.partition("@")[0] for t in targets if t.partition("@")[0] in RELEASES))
    if not bases:
        raise UserError(f"{flag} {spec}: none of the targets has releases to search "
                        f"(versioned targets: {', '.join(RELEASES)})")
    try:
        return dict(_releases(b, spec) for b in bases)
    except UserError as exc:
        raise UserError(f"{flag} {spec}: {str(exc).removeprefix('--target ').replace(f'--range {spec}: ', '')}") \
            from None


def bisect_bundle(folder: Path, target: str, releases: list[str], *, options: dict[str, str] | None = None,
                  timeout_s: float = 300.0, say: Any = None, rtol: float | None = None,
                  atol: float | None = None) -> dict[str, Any]:
    """Bisect the finding of the explain/fuzz bundle ``folder`` over ``releases`` of
    ``target``'s stack (:func:`compstack.explain.versions.bisect_versions`, ``options``:
    the user's ``--option`` values of that target; ``rtol``/``atol``: the tolerances the
    finding was made with, None: that function's defaults) and add the answer to its
    ``ISSUE.md``; the answer as JSON (``summary``, ``answer``, ``issue``...).

    Raises:
        UserError: the bundle cannot be read or its ISSUE.md written.
    """
    from compstack.explain.versions import bisect_versions as run_bisect
    from compstack.explain.versions import write_issue

    proto, feeds, _ = _model_and_feeds(str(folder), None, 0)
    tol = {k: v for k, v in (("rtol", rtol), ("atol", atol)) if v is not None}
    result = run_bisect(proto, feeds, target.partition("@")[0], releases, options=options, timeout_s=timeout_s,
                        on_progress=say, **tol)
    doc = result.to_dict()
    try:
        doc["issue"] = str(write_issue(folder, result))
    except OSError as exc:
        raise UserError(f"{folder}/ISSUE.md: cannot write ({exc.strerror or exc})") from None
    return doc


@click.command("bisect-versions", short_help="The release where a finding appears or goes away.")
@click.argument("source")
@click.option("--target", "--targets", "-t", "target", required=True, metavar="TARGET",
              help="A target with releases (ort-cpu, iree-llvm-cpu); --targets is the same option.")
@click.option("--range", "range_spec", default="..", show_default=True, metavar="FIRST..LAST",
              help="Releases to search (registry order; either end may be left out).")
@click.option("--inputs", metavar="NPZ", help="Inputs of a model SOURCE (default: generated with --seed).")
@click.option("--seed", default=0, show_default=True, help="Seed of generated inputs.")
@click.option("--option", "options", multiple=True, metavar="TARGET:KEY=VALUE", help="A target option (repeatable).")
@click.option("--timeout", default=300.0, show_default=True, help="Seconds per compile-and-run.")
@click.option("--no-issue", is_flag=True, help="Leave a bundle's ISSUE.md as it is.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout, nothing else.")
def bisect_versions(source: str, target: str, range_spec: str, inputs: str | None, seed: int,
                    options: tuple[str, ...], timeout: float, no_issue: bool, as_json: bool) -> None:
    """Find the two adjacent releases of TARGET's stack between which the finding
    (TARGET != the float64 reference, explain's verdict) flips, by binary search over
    the releases in --range: at most ceil(log2 n) + 2 evaluations; releases that cannot
    install are skipped; each env is built once and kept in the store. SOURCE is an
    explain/fuzz bundle (its ISSUE.md gets the answer) or a model with --inputs.

    Examples:

        \b
        compstack bisect-versions bug/ --target ort-cpu --range 1.15.0..1.20.0
        compstack bisect-versions model.onnx --inputs in.npz --target ort-cpu --range 1.16.0..1.18.1 --json
    """
    # Raises UserError: bad SOURCE, target, range or option.
    from compstack.explain.versions import bisect_versions as run_bisect
    from compstack.explain.versions import write_issue

    base, releases = _releases(target, range_spec)
    opts = parse_target_options(options).get(base, {})
    proto, feeds, bundle = _model_and_feeds(source, inputs, seed)
    say = None if as_json else (lambda s: click.echo(terminal(s), err=True))
    result = run_bisect(proto, feeds, base, releases, options=opts, timeout_s=timeout, on_progress=say)
    doc = result.to_dict()
    if bundle is not None and not no_issue:
        try:
            doc["issue"] = str(write_issue(bundle, result))
        except OSError as exc:
            raise UserError(f"{bundle}/ISSUE.md: cannot write ({exc.strerror or exc})") from None
    if as_json:
        click.echo(json.dumps(doc, indent=1))
    else:
        click.echo(result.summary)
        if doc.get("issue"):
            click.echo(f"added to {doc['issue']}")
    raise SystemExit(0 if result.answer == "flip" else 1 if result.answer in ("bad-all", "good-all") else 2)
