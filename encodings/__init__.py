"""Position encodings for a causal decoder, as small torch modules behind one interface.

``build(name, num_heads, head_dim, **options)`` returns a ``PositionEncoding`` that may rotate q and k and
may return an additive bias over (heads, query positions, key positions). The pure math is exposed for
tests against reference implementations.
"""

from .alibi import alibi_slopes
from .base import EncodingError, PositionEncoding
from .fire import fire_normalized_distance
from .registry import (
    NAMES,
    build,
    canonical_name,
    family,
    options,
    rescaled,
    rescaled_options,
    shares_weights,
    trained_as,
    training_options,
)
from .rotary import rope_inv_freq, yarn_inv_freq
from .t5 import t5_relative_position_bucket

__all__ = [
    "NAMES",
    "EncodingError",
    "PositionEncoding",
    "alibi_slopes",
    "build",
    "canonical_name",
    "family",
    "fire_normalized_distance",
    "options",
    "rescaled",
    "rescaled_options",
    "rope_inv_freq",
    "shares_weights",
    "t5_relative_position_bucket",
    "trained_as",
    "training_options",
    "yarn_inv_freq",
]
