"""ltsgen: long-context research data, streaming loaders and position-encoding experiments."""

# Part of every build's identity: a change to what a builder writes (its job layout, its shards or the
# statistics its jobs keep for the card) takes a new version, so that no build is resumed, or kept, with
# the jobs of another one.
__version__ = "0.2.2"
