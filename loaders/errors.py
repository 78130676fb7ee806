"""The one error of the loaders a user can cause. A leaf of ``ltsgen.loaders``: it imports nothing of ours but
the error root, so every loader module (and every part above) raises and catches it without an import cycle.
"""

from __future__ import annotations

from ltsgen.errors import LtsgenError


class LoaderError(LtsgenError, ValueError):
    """A dataset directory, shard, loader state, option or file that the loaders cannot use; the message is
    one line naming the file or field.

    Also a ``ValueError``, as the dataset and state errors it unites were: a caller that catches
    ``ValueError`` around ``load_state_dict`` (a state of another world size) still does. Its one subclass,
    ``storage.StorageError`` (and ``LockHeld`` under it), is a file or folder that cannot be read, written
    or claimed, which its callers tell apart.
    """
