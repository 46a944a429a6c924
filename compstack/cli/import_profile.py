"""``compstack import-profile``: a trtexec per-layer profile mapped to the model's ONNX nodes."""

from __future__ import annotations

import json

import click

from compstack.cli.common import load_source
from compstack.cli.options import cache_dir_option, json_option

__all__ = ["import_profile"]


@click.command("import-profile", short_help="Map a trtexec per-layer profile to the model's ONNX nodes.")
@click.argument("model")
@click.option("--profile", "profile", required=True, type=click.Path(dir_okay=False),
              help="trtexec --exportProfile JSON.")
@click.option("--layer-info", "layer_info", type=click.Path(dir_okay=False),
              help="trtexec --exportLayerInfo JSON (built with --profilingVerbosity=detailed).")
@json_option("Print the mapping as JSON on stdout, nothing else.")
@cache_dir_option("Cache folder (zoo exports are cached).")
def import_profile(model: str, profile: str, layer_info: str | None, as_json: bool, cache_dir: str | None) -> None:
    """Map each TensorRT layer of a trtexec profile back to MODEL's nodes (zoo:NAME, file.onnx):
    per-layer times, the nodes each covers, coverage and unmapped nodes.

    Examples:

        \b
        compstack import-profile model.onnx --profile prof.json --layer-info layers.json
        compstack import-profile model.onnx --profile prof.json --json
    """
    from compstack.targets.trt.profile import format_text, load_layer_info, load_profile, map_profile

    load_profile(profile)  # bad files fail before the model is imported
    if layer_info is not None:
        load_layer_info(layer_info)
    source = load_source(model, cache_dir)
    report = map_profile(source.model, profile, layer_info, model_name=source.name)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=1))
    else:
        click.echo("\n".join(format_text(report)))
