"""``compstack versions TARGET``: the releases of a stack, which are provisioned here (and
their size), which cannot install and why, and how far back compstack's adapter is
checked (:func:`compstack.run.releases.describe`).

``--provision V1,V2`` builds those releases' envs now (each one line: built or why not);
a release named this way that cannot be provisioned makes the exit status 2 after the
others were tried.
"""

from __future__ import annotations

import json
from typing import Any

import click

from compstack.cli.options import cache_dir_option
from compstack.core.errors import UserError

__all__ = ["versions"]


def _size(n: int) -> str:
    return f"{n / 1e6:.0f} MB"


def _provision(target: str, spec: str, cache_dir: str | None) -> list[str]:
    """Build the envs of ``target`` at each version of ``spec``; returns the failures."""
    from compstack.core.envs import EnvError
    from compstack.run.releases import interpreter

    bad: list[str] = []
    for v in (x.strip() for x in spec.split(",") if x.strip()):
        name = f"{target}@{v}"
        try:
            interpreter(name, cache_dir)
            click.echo(f"{name}: provisioned", err=True)
        except (EnvError, OSError) as exc:
            click.echo(f"{exc}", err=True)
            bad.append(name)
    return bad


def _print(doc: dict[str, Any]) -> None:
    rel = doc["releases"]
    head = f"{doc['target']}: {doc['package']}"
    if rel:
        click.echo(f"{head}: {len(rel)} releases on the registry ({rel[0]} .. {rel[-1]})")
    else:
        click.echo(f"{head}: registry not readable ({doc['registry_error']})")
    click.echo(f"  adapter: {doc['supported']}")
    click.echo(f"  beside compstack: {doc['parent'] or 'not installed'}")
    envs = {e["version"]: e for e in doc["provisioned"]}
    for v in list(rel) + [v for v in list(envs) + list(doc["failed"]) if v not in rel]:
        if v in envs:
            e = envs[v]
            line = f"provisioned  {_size(e['bytes']):>7}  ({e['tool']}, built in {e['build_s']:.1f} s)"
        elif v in doc["failed"]:
            line = f"failed       {doc['failed'][v]}"
        else:
            line = "-"
        click.echo(f"  {v:<12} {line}" + ("" if v in rel else "  (not on the registry)"))


def _not_an_alias(target: str) -> None:
    """An alias (``cpu``) names several stacks: say so, and which (not "did you mean cpu")."""
    from compstack import targets as registry

    if target in (*registry.ALIASES, "all"):
        names = registry.resolve(target)
        raise UserError(f"compstack versions {target}: '{target}' is an alias of {len(names)} targets; give one "
                        f"stack ({', '.join(names)})")


@click.command(short_help="A stack's releases: served, provisioned (size), failed (why).")
@click.argument("target")
@click.option("--provision", metavar="V1,V2", help="Build the envs of these releases now.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout, nothing else.")
@cache_dir_option()
def versions(target: str, provision: str | None, as_json: bool, cache_dir: str | None) -> None:
    """The releases of TARGET's stack the registry serves (read with pip), which are
    provisioned in the store and their size, which failed to provision here and why,
    and how far back compstack's adapter is checked. Use a release as
    --targets TARGET@VERSION in any command.

    Examples:

        \b
        compstack versions ort-cpu
        compstack versions ort-cpu --provision 1.20.0,1.24.1
        compstack versions ort-cpu --json
    """
    # Raises UserError: unknown target, one without versioned form, or a release given to
    # --provision that cannot be provisioned (after the others were tried).
    from compstack.run.releases import describe

    if provision is not None and not [x for x in provision.split(",") if x.strip()]:
        raise UserError(f"--provision: no release named in {provision!r} (give V1,V2, e.g. --provision 1.20.0)")
    if "@" in target:
        base, _, release = target.partition("@")
        raise UserError(f"{target}: give the stack without @VERSION (compstack versions {base} lists its releases; "
                        f"--provision {release or 'V'} builds one)")
    _not_an_alias(target)
    describe(target, cache_dir)  # a bad target before any build
    bad = _provision(target.partition("@")[0], provision, cache_dir) if provision else []
    doc = describe(target, cache_dir)
    if as_json:
        click.echo(json.dumps(doc, indent=1))
    else:
        _print(doc)
    if bad:
        raise UserError(f"--provision: could not provision {', '.join(bad)}")
