"""The bottom layer: errors, settings, the store, the results database, IR, latency, processes."""

import os as _os

#: The environment as it was when compstack was first imported (``import compstack`` loads
#: this package first), before any framework added variables of its own (importing JAX
#: sets ``TF_CPP_MIN_LOG_LEVEL`` and ``TPU_SKIP_MDS_QUERY``): the environment the daemon is
#: keyed on and started with (:mod:`compstack.run.daemon`), so a command that imported a
#: framework and one that did not find the same daemon.
ENV_AT_IMPORT: dict[str, str] = dict(_os.environ)
