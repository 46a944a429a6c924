"""Write ``compstack/frontends/zoo/_toy_meta.py``: what ``compstack zoo`` lists for each toy-tier
model (node and parameter counts, op counts, inputs, outputs, value ranges), read from the
model as this checkout exports it, so that listing builds nothing (issue #28 part 7).

Usage: ``python3 scripts/toy_zoo_meta.py [--cache-dir DIR]``. Models whose framework is not
available here (Paddle, MindSpore without their environments) keep the entry they had;
``tests/test_zoo_meta.py`` checks every entry against a fresh export.
"""

from __future__ import annotations

import argparse
import pprint
import sys
import tempfile
import time
from pathlib import Path

from compstack.frontends import zoo
from compstack.frontends.zoo import _toy_meta

#: info() fields that come from the zoo's own table, not from the export
_FROM_ENTRY = ("name", "tier", "framework", "description")
OUT = Path(__file__).resolve().parents[1] / "compstack" / "frontends" / "zoo" / "_toy_meta.py"
HEADER = '''"""What ``compstack zoo`` lists for each toy-tier model, so that listing builds nothing.

Written by ``scripts/toy_zoo_meta.py`` from the models as exported (do not edit by hand);
``tests/test_zoo_meta.py`` checks every entry against a fresh export. Keys are the fields of
:func:`compstack.frontends.zoo.info` that come from the export, except ``fingerprint``.
"""

from __future__ import annotations

from typing import Any

#: toy name -> info() fields read from the export (no fingerprint)
TOY: dict[str, dict[str, Any]] = '''


def main(argv: list[str]) -> int:
    """Export every available toy model and rewrite :data:`OUT`."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache-dir", default=None)
    args = ap.parse_args(argv)
    meta = dict(_toy_meta.TOY)
    with tempfile.TemporaryDirectory() as tmp:
        root = args.cache_dir or tmp
        for name in zoo.names(available_only=True, tier="toy"):
            t0 = time.perf_counter()
            row = zoo.info(name, cache_dir=root)
            for key in ("fingerprint", *_FROM_ENTRY):
                row.pop(key)
            meta[name] = row
            print(f"{name}: {row['nodes']} nodes, {row['params']} params ({time.perf_counter() - t0:.1f} s)",
                  file=sys.stderr)
    order = {n: i for i, n in enumerate(zoo.names(tier="toy"))}
    meta = dict(sorted(meta.items(), key=lambda kv: order.get(kv[0], len(order))))
    OUT.write_text(HEADER + pprint.pformat(meta, width=110, sort_dicts=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
