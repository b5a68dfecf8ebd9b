"""offline-eval: Japanese legal benchmarks on local open-weight models, with no network."""

import os as _os

# No hub is ever reachable for our users; make every HF library fail fast instead of retrying.
_os.environ.setdefault("HF_HUB_OFFLINE", "1")
_os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
_os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

__version__ = "0.1.0"
