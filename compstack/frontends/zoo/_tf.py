"""zoo:tf-cnn — a small Keras CNN (NHWC), fixed seed, offline.

Run by compstack in TensorFlow's own process (:mod:`compstack.frontends.from_framework`);
compstack never imports this module itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf


def build() -> tuple[Any, tuple[np.ndarray]]:
    """Conv-BN-ReLU, depthwise Conv-ReLU, MaxPool, Conv, global mean, Dense-softmax;
    image float32[2, 32, 32, 3] (BatchNorm statistics set to non-trivial values)."""
    tf.keras.utils.set_random_seed(0)
    layers = tf.keras.layers
    model = tf.keras.Sequential([
        tf.keras.Input((32, 32, 3), name="image"),
        layers.Conv2D(16, 3, padding="same", use_bias=False, name="stem"),
        layers.BatchNormalization(name="stem_bn"),
        layers.ReLU(name="stem_relu"),
        layers.DepthwiseConv2D(3, padding="same", activation="relu", name="dw"),
        layers.MaxPooling2D(2, name="pool"),
        layers.Conv2D(32, 1, activation="relu", name="pw"),
        layers.GlobalAveragePooling2D(name="gap"),
        layers.Dense(10, activation="softmax", name="head"),
    ], name="tf_cnn")
    rng = np.random.default_rng(0)
    bn = model.get_layer("stem_bn")
    gamma, beta, mean, var = (w.numpy() for w in bn.weights)
    bn.set_weights([rng.uniform(0.5, 1.5, gamma.shape).astype(np.float32),
                    rng.normal(0, 0.1, beta.shape).astype(np.float32),
                    rng.normal(0, 0.1, mean.shape).astype(np.float32),
                    rng.uniform(0.5, 1.5, var.shape).astype(np.float32)])
    image = rng.standard_normal((2, 32, 32, 3)).astype(np.float32)
    return model, (image,)
