"""Model sources: ONNX files, torch, JAX, Python files, TF/Paddle/MindSpore, the zoo."""

# Loading a model checks its op domains against the custom-op registry: register it first.
import compstack.ops._registry  # noqa: E402,F401
