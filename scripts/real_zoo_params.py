"""Print the exact parameter counts of the real-tier zoo (for ``_PARAMS`` in
``compstack/frontends/zoo/_real.py``): each model is built on ``torch.device("meta")``.

Usage: ``python3 scripts/real_zoo_params.py [NAME ...]``; prints ``"name": count,`` lines
and the seconds each build took on stderr.
"""

from __future__ import annotations

import sys
import time

from compstack.frontends.zoo._real import REAL
from compstack.frontends.zoo._real_build import construct, count_params


def main(argv: list[str]) -> int:
    """Build each named (default: every) real-tier model on meta and print its count."""
    for name in argv or [n for n in REAL if "-opset" not in n]:
        t0 = time.perf_counter()
        try:
            n = count_params(construct(name, device="meta"))
        except Exception as exc:  # noqa: BLE001 - report every failing constructor, go on
            print(f"# {name}: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        print(f'    "{name}": {n},')
        print(f"{name}: {time.perf_counter() - t0:.2f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
