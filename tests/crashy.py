"""Targets made to misbehave, for the isolation tests (imported by worker processes).

Each wraps ort-cpu but breaks in ``run``: a segfault, a hang, or a memory hog; or, for
``crash-latency``/``crash-latency-hang``, a segfault or a hang only once timing starts;
``crash-slow`` is right but takes 0.4 s more per timed run. ``env-echo`` does not break: its
flags show the worker's ``COMPSTACK_TEST_ENV`` and process id (a job's ``env`` reached it).
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from pathlib import Path

import numpy as np

from compstack.targets.ort.target import OrtCpuTarget, _OrtCompiled, _OrtLowered


class _CrashCompiled(_OrtCompiled):
    def run_impl(self, inputs):  # noqa: ANN001
        mode = self.target.mode
        if mode == "segfault":
            ctypes.string_at(0)  # reads address 0: SIGSEGV
        elif mode == "abort":
            os.abort()
        elif mode == "hang":
            time.sleep(3600)
        elif mode == "hog":
            blocks = []
            while True:  # touch 64 MiB at a time until the runner kills us
                blocks.append(np.ones(8 * 2**20, dtype=np.float64))
        elif mode == "raise":
            raise RuntimeError("injected stack failure\nwith a second line")
        elif mode == "torn":  # a worker dying half-way through writing its result
            from compstack.run.worker import current_job_file

            Path(current_job_file() or sys.argv[-1]).with_name("result.json").write_text('{"target": "crash-torn", "sta')
            os._exit(0)
        return super().run_impl(inputs)

    def prepare_impl(self, inputs):  # noqa: ANN001, ANN201
        if self.target.mode == "latency-segfault":  # runs fine once, dies while timing
            ctypes.string_at(0)
        call = super().prepare_impl(inputs)
        if self.target.mode == "latency-hang":  # runs fine once, hangs while timing
            return lambda: time.sleep(3600)
        if self.target.mode == "slow":  # every timed run takes 0.4 s more

            def slow():  # noqa: ANN202
                time.sleep(0.4)
                return call()

            return slow
        return call


class _CrashLowered(_OrtLowered):
    def compile_impl(self):  # noqa: ANN201
        inner = super().compile_impl()
        inner.__class__ = _CrashCompiled
        return inner


class _Base(OrtCpuTarget):
    mode = ""

    def lower_impl(self, model):  # noqa: ANN001, ANN201
        lowered = super().lower_impl(model)
        lowered.__class__ = _CrashLowered
        return lowered

    def load_compiled(self, folder, model):  # noqa: ANN001, ANN201
        raise RuntimeError("never cached")


class SegfaultTarget(_Base):
    name, mode = "crash-segfault", "segfault"


class AbortTarget(_Base):
    name, mode = "crash-abort", "abort"


class HangTarget(_Base):
    name, mode = "crash-hang", "hang"


class HogTarget(_Base):
    name, mode = "crash-hog", "hog"


class RaiseTarget(_Base):
    name, mode = "crash-raise", "raise"


class TornTarget(_Base):
    name, mode = "crash-torn", "torn"


class StartCrashTarget(_Base):
    """Dies while a (conformance) worker starts: before it can say it is ready."""

    name = "crash-start"

    @classmethod
    def availability(cls):  # noqa: ANN206
        os.abort()


class StartHangTarget(_Base):
    """Hangs while a worker starts."""

    name = "crash-start-hang"

    @classmethod
    def availability(cls):  # noqa: ANN206
        time.sleep(3600)


class LatencySegfaultTarget(_Base):
    name, mode = "crash-latency", "latency-segfault"


class LatencyHangTarget(_Base):
    name, mode = "crash-latency-hang", "latency-hang"


class SlowTarget(_Base):
    name, mode = "crash-slow", "slow"


class EnvEchoTarget(OrtCpuTarget):
    """ort-cpu whose flags name the worker's ``COMPSTACK_TEST_ENV`` and process id."""

    name = "env-echo"

    def flags(self):  # noqa: ANN201
        return {**super().flags(), "test_env": os.environ.get("COMPSTACK_TEST_ENV", ""), "pid": os.getpid()}
