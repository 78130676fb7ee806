"""The builds that the object-store tests (S3, GCS, the Hub, Ray) run and compare: their arguments, and the
sha256 of every file a build publishes, on a local folder and on a store."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

LTSGEN = str(Path(sys.executable).parent / "ltsgen")
SMALL = ["--num-stories", "40", "--min-words", "100", "--max-words", "900", "--seed", "3"]
SMALL += ["--samples-per-shard", "4", "--no-progress"]
# small stories in many shards: uploads take long enough that a kill lands mid-build
KILLED = ["--num-stories", "40", "--min-words", "100", "--max-words", "900", "--seed", "5"]
KILLED += ["--samples-per-shard", "2", "--no-progress"]
# where AWS_ENDPOINT_URL points while only --storage-options name the server: nothing listens there, so an
# option that did not arrive fails here instead of reaching a cloud endpoint
DEAD_ENDPOINT = "http://127.0.0.1:9"


def local_tree(directory: Path) -> dict[str, str]:
    """sha256 of every file a build publishes (its .ltsgen/ bookkeeping aside)."""
    return {
        path.relative_to(directory).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and ".ltsgen" not in path.relative_to(directory).parts
    }


def remote_tree(fs, prefix: str) -> dict[str, str]:
    return {
        name[len(prefix) + 1 :]: hashlib.sha256(fs.cat_file(name)).hexdigest()
        for name in sorted(fs.find(prefix))
        if "/.ltsgen/" not in name[len(prefix) :]
    }


# on the C4 sample: 27 shards in train/256-inf (a shard rolls over), one in each other bucket
BUCKETS = ["--source", "c4", "--bucket-lengths", "64,128,256", "--eval-lengths", "64,128"]
BUCKETS += ["--eval-sequences", "4", "--shard-tokens", "16000", "--no-progress"]
