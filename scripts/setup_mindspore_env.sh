#!/usr/bin/env bash
# Create the MindSpore environment compstack's `mindspore` frontend and target use.
#
# MindSpore is large (804 MB wheel, about 2.5 GB installed) and cannot share a process with
# Paddle, so it gets a venv of its own. compstack runs only a small standalone script there
# (it does not import compstack), so the venv needs nothing but the framework.
#
# Usage:  scripts/setup_mindspore_env.sh [DIR]     (default DIR: ~/.compstack/envs/mindspore)
# Then:   export COMPSTACK_MINDSPORE_PYTHON=DIR/bin/python
set -euo pipefail
DIR="${1:-$HOME/.compstack/envs/mindspore}"
PY="${PYTHON:-python3}"
# compstack starts the framework with `python -P` (Python 3.11+): the current folder stays off sys.path.
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "need Python 3.11+ (set PYTHON=python3.11)")'
"$PY" -m venv "$DIR"
"$DIR/bin/python" -m pip install --upgrade --quiet pip
# numpy<2: parts of MindSpore 2.10 are built against NumPy 1.x (with NumPy 2, Tensor.mean over a
# tuple of axes raises "numpy.core.multiarray failed to import" inside run_op_async).
"$DIR/bin/python" -m pip install --quiet "mindspore==2.10.*" "numpy<2"
"$DIR/bin/python" -c "import mindspore; print('mindspore', mindspore.__version__)"
echo "export COMPSTACK_MINDSPORE_PYTHON=$DIR/bin/python"
