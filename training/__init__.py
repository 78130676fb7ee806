"""Training: the compact model, the loop, evaluation and reports."""

from .compare import compare, resolve_encodings
from .evaluate import evaluate_run
from .model import KVCache, ModelConfig, TransformerLM
from .train import TrainConfig, train

__all__ = [
    "KVCache",
    "ModelConfig",
    "TrainConfig",
    "TransformerLM",
    "compare",
    "evaluate_run",
    "resolve_encodings",
    "train",
]
