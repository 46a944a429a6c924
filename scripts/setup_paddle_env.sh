#!/usr/bin/env bash
# Create the PaddlePaddle environment compstack's `paddle` frontend and target use.
#
# paddle2onnx pins onnx<=1.17, which would break compstack's own environment, so Paddle
# lives in a venv of its own. compstack runs only a small standalone script there (it does
# not import compstack), so the venv needs nothing but the framework and its exporter.
#
# Usage:  scripts/setup_paddle_env.sh [DIR]        (default DIR: ~/.compstack/envs/paddle)
# Then:   export COMPSTACK_PADDLE_PYTHON=DIR/bin/python
set -euo pipefail
DIR="${1:-$HOME/.compstack/envs/paddle}"
PY="${PYTHON:-python3}"
# compstack starts the framework with `python -P` (Python 3.11+): the current folder stays off sys.path.
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "need Python 3.11+ (set PYTHON=python3.11)")'
"$PY" -m venv "$DIR"
"$DIR/bin/python" -m pip install --upgrade --quiet pip
# onnx_graphsurgeon is preinstalled (paddle2onnx would pip-install it on first export);
# packaging is imported by paddle2onnx but not declared.
"$DIR/bin/python" -m pip install --quiet "paddlepaddle==3.3.*" "paddle2onnx==2.1.*" onnx_graphsurgeon packaging
"$DIR/bin/python" -c "import paddle, paddle2onnx; print('paddle', paddle.__version__, 'paddle2onnx', paddle2onnx.__version__)"
echo "export COMPSTACK_PADDLE_PYTHON=$DIR/bin/python"
