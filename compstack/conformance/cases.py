"""ONNX node-test cases for ``compstack conformance``: moved to
:mod:`compstack.frontends.node_cases` (the conformance task in :mod:`compstack.run.tasks`
reads them, and ``run/`` sits below ``conformance/``); this module re-exports them."""

from compstack.frontends.node_cases import Case, cases_path, load_cases, read_cases, select

__all__ = ["Case", "cases_path", "load_cases", "read_cases", "select"]
