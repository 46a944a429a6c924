"""A run-time registration with a malformed or unimportable ``module:Class`` (found by a
new-user session): README "From Python" says bad input raises ``UserError`` with one line;
``targets.register`` used to accept any string and ``targets.get`` then raised the raw
``AttributeError``/``ModuleNotFoundError``. Now ``register`` checks the form and ``get``
names the reference it cannot load.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from compstack import targets
from compstack.core.errors import UserError


@pytest.fixture
def restore_extra() -> Iterator[None]:
    saved = list(targets._EXTRA)
    yield
    targets._EXTRA[:] = saved


@pytest.mark.parametrize("ref", ["toy_target", "toy_target:Nope", "no_such_module_xyz:Cls"])
def test_bad_ref_is_user_error(restore_extra: None, ref: str) -> None:
    with pytest.raises(UserError, match="toy_target|no_such_module_xyz"):
        targets.register("user3-bad-ref", ref)
        targets.get("user3-bad-ref")
