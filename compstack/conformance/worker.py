"""The conformance case runner moved to :mod:`compstack.run.tasks.conformance` (task
``conformance``, run by the executors of :mod:`compstack.run.executors`); this module
re-exports its comparison rule and case runner."""

from compstack.run.tasks.conformance import compare_case, run_case

__all__ = ["compare_case", "run_case"]
