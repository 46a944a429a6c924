"""``compstack cache info|prune|clear``: what the store holds, and making it smaller.

The store (:mod:`compstack.core.store`) lives under ``--cache-dir`` >
``$COMPSTACK_CACHE_DIR`` > ``$XDG_CACHE_HOME/compstack`` > ``~/.cache/compstack``.

* ``info``: entries and bytes per kind (``--json``: ``{"root", "kinds": {kind:
  {"folder", "entries", "bytes", "about"}}, "entries", "bytes"}``).
* ``prune``: ``--older-than 30d`` deletes entries not used for that long (last use: the
  last verified hit, else the publish); ``--max-size 5G`` then deletes the least recently
  used ones until the store fits. At least one of the two is required.
* ``clear``: deletes every entry, or those of ``--kind``.

``prune`` and ``clear`` print what they deleted (``--json``: ``{"removed", "bytes",
"kinds": {kind: count}}``). Bad input (an unknown kind, a size or age that does not
parse) is one line and exit 2.
"""

from __future__ import annotations

import json
from typing import Any

import click

from compstack.core.errors import UserError

__all__ = ["cache"]

_CACHE_DIR = click.option("--cache-dir", type=click.Path(file_okay=False),
                          help="Store root [env COMPSTACK_CACHE_DIR; default $XDG_CACHE_HOME/compstack or "
                               "~/.cache/compstack].")
_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout, nothing else.")


def _store(cache_dir: str | None) -> Any:
    from compstack.core.store import open_store

    return open_store(cache_dir)


def _human(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return f"{n:.1f} TB"


def _removed(gone: list[Any], as_json: bool, verb: str) -> None:
    kinds: dict[str, int] = {}
    for r in gone:
        kinds[r.kind] = kinds.get(r.kind, 0) + 1
    total = sum(r.bytes for r in gone)
    if as_json:
        click.echo(json.dumps({"removed": len(gone), "bytes": total, "kinds": kinds}, indent=1))
        return
    click.echo(f"{verb} {len(gone)} entries ({_human(total)})" +
               (": " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) if kinds else ""))


@click.group(short_help="What the store (artifacts, models, zoo, stages...) holds; prune or clear it.")
def cache() -> None:
    """Show, prune or clear compstack's store of compiled artifacts, stage texts,
    canonical models, zoo exports, conformance cases, kernel libraries, peaks, oracle
    results and a sweep's judged rows.

    Examples:

        \b
        compstack cache info
        compstack cache prune --older-than 30d --max-size 5G
        compstack cache clear --kind artifacts
    """


@cache.command(short_help="Entries and bytes per kind.")
@_CACHE_DIR
@_JSON
def info(cache_dir: str | None, as_json: bool) -> None:
    """Entries and bytes per kind of the store.

    Examples:

        \b
        compstack cache info
        compstack cache info --json
    """
    store = _store(cache_dir)
    kinds = store.info()
    doc = {"root": str(store.root), "kinds": kinds, "entries": sum(k["entries"] for k in kinds.values()),
           "bytes": sum(k["bytes"] for k in kinds.values())}
    if as_json:
        click.echo(json.dumps(doc, indent=1))
        return
    click.echo(f"store {store.root}")
    for name, k in kinds.items():
        click.echo(f"  {name:<12} {k['entries']:>6} entries {_human(k['bytes']):>10}  {k['about']}")
    click.echo(f"  {'total':<12} {doc['entries']:>6} entries {_human(doc['bytes']):>10}")


@cache.command(short_help="Delete entries unused for a while, or the least recently used beyond a size.")
@click.option("--older-than", metavar="AGE", help="Delete entries not used for AGE (30d, 12h, 2w).")
@click.option("--max-size", metavar="SIZE", help="Then delete least recently used entries until the store "
                                                 "holds at most SIZE (5G, 500MB, 2GiB).")
@_CACHE_DIR
@_JSON
def prune(older_than: str | None, max_size: str | None, cache_dir: str | None, as_json: bool) -> None:
    """Delete entries by age and/or total size (least recently used first).

    Give --older-than, --max-size or both; a value that does not parse is one line naming the flag.

    Examples:

        \b
        compstack cache prune --older-than 30d
        compstack cache prune --max-size 5G
        compstack cache prune --older-than 7d --max-size 500M --json
    """
    # An error (exit 2) when neither flag is given or a value does not parse (UserError names the flag).
    from compstack.core.store import parse_age, parse_size

    if older_than is None and max_size is None:
        raise UserError("cache prune: give --older-than AGE and/or --max-size SIZE")
    try:
        age = parse_age(older_than) if older_than is not None else None
    except ValueError as exc:
        raise UserError(f"--older-than: {exc}") from None
    try:
        size = parse_size(max_size) if max_size is not None else None
    except ValueError as exc:
        raise UserError(f"--max-size: {exc}") from None
    _removed(_store(cache_dir).prune(older_than_s=age, max_bytes=size), as_json, "pruned")


@cache.command(short_help="Delete every entry (or those of some kinds).")
@click.option("--kind", "kinds", multiple=True, metavar="KIND",
              help="Only this kind (see `compstack cache info`); may be given more than once.")
@_CACHE_DIR
@_JSON
def clear(kinds: tuple[str, ...], cache_dir: str | None, as_json: bool) -> None:
    """Delete every entry of the store, or only those of each --kind (`compstack cache info` lists the kinds).

    Examples:

        \b
        compstack cache clear
        compstack cache clear --kind oracle --kind rows
        compstack cache clear --cache-dir /path/to/cache --json
    """
    # An unknown --kind is an error (exit 2) that lists the kinds (UserError), before anything is deleted.
    from compstack.core.store import KINDS

    for kind in kinds:
        if kind not in KINDS:
            raise UserError(f"--kind {kind}: unknown kind (kinds: {', '.join(KINDS)})")
    store = _store(cache_dir)
    _removed([e for kind in dict.fromkeys(kinds or [None]) for e in store.clear(kind)], as_json, "cleared")
