"""Namespace rules of the long-term store (LangGraph's; docs/store.md, rule ST1).

A namespace is a tuple of labels. A label is a non-empty string without "." and
without NUL; a namespace written to is non-empty and its root label is not
"langgraph" (LangGraph reserves it). Because no label holds a ".", the dotted
path "a.b.c" is a lossless text form of ("a", "b", "c"): it is what the
database stores and indexes, and what the LangGraph server's GET endpoint takes.

Labels and keys are brought to Unicode NFC here, on every path that reads or
writes (each one validates through these functions): "é" typed as one code
point or as "e" and a combining accent is one label, so one item, and nobody
can hold a second item that looks the same under another spelling. Nothing
else is folded: NFKC is not applied (full-width letters stay distinct), and
letters of different scripts that look alike (Cyrillic "а", Latin "a") are
different labels, as they are different characters (docs/store.md, "Rules").
"""

from __future__ import annotations

import unicodedata
from typing import Any

from memoryadmin.errors import InvalidInput

from memoryadmin.jsoncheck import text_storable

SEPARATOR = "."
RESERVED_ROOT = "langgraph"
WILDCARD = "*"
# Bounds that keep (namespace_path, key) inside one btree index entry on
# PostgreSQL (about 2.7 kB) whatever the characters: 1 kB each, in UTF-8 bytes.
MAX_PATH_BYTES = 1024
MAX_KEY_BYTES = 1024
MAX_DEPTH = 32

Namespace = tuple[str, ...]


def _refuse(field: str, message: str) -> InvalidInput:
    return InvalidInput(f"{field}: {message}", fields={field: [message]})


def _nfc(text: str) -> str:
    # ASCII text is NFC (isascii reads a flag of the string); is_normalized is a quick check
    # for the rest, so a label already in NFC costs no copy.
    if text.isascii() or unicodedata.is_normalized("NFC", text):
        return text
    return unicodedata.normalize("NFC", text)


def _utf8_length(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode())


def namespace_validate(
    value: Any,
    *,
    field: str = "namespace",
    for_write: bool = False,
) -> Namespace:
    """Check a namespace given as a list of labels and return it as a tuple.

    `for_write`: the namespace of a put (non-empty, root not "langgraph").
    "*" is an ordinary label here; only list_namespaces patterns read it as a wildcard.
    Labels come back in NFC.
    """
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, list):
        raise _refuse(field, "must be a list of strings.")
    if len(value) > MAX_DEPTH:
        raise _refuse(field, f"has {len(value)} labels; at most {MAX_DEPTH}.")
    plain = True
    for index, label in enumerate(value):
        if type(label) is str and label and label.isascii() and SEPARATOR not in label and "\x00" not in label:
            continue  # the usual label: fine, and NFC as it is
        plain = False
        where = f"{field}[{index}]"
        if not isinstance(label, str):
            raise InvalidInput(f"{where}: a label must be a string.", fields={field: [f"label {index} is not a string."]})
        if not label:
            raise InvalidInput(f"{where}: a label cannot be empty.", fields={field: [f"label {index} is empty."]})
        if SEPARATOR in label:
            raise InvalidInput(
                f"{where}: a label cannot contain '.' ({label!r}).",
                fields={field: [f"label {index} contains '.'."]},
            )
        if not text_storable(label):
            raise InvalidInput(
                f"{where}: a label cannot contain NUL or a lone surrogate.",
                fields={field: [f"label {index} contains NUL or a lone surrogate."]},
            )
    namespace = tuple(value) if plain else tuple(_nfc(label) for label in value)
    if for_write:
        if not namespace:
            raise _refuse(field, "cannot be empty.")
        if namespace[0] == RESERVED_ROOT:
            raise _refuse(field, f"the root label {RESERVED_ROOT!r} is reserved.")
    if _utf8_length(namespace_to_path(namespace)) > MAX_PATH_BYTES:
        raise _refuse(field, f"is longer than {MAX_PATH_BYTES} bytes once joined with '.'.")
    return namespace


def namespace_from_path(path: Any, *, field: str = "namespace") -> Namespace:
    """Parse the dotted form ("a.b.c"); "" is the empty namespace."""
    if not isinstance(path, str):
        raise _refuse(field, "must be a dotted string.")
    if path == "":
        return ()
    return namespace_validate(path.split(SEPARATOR), field=field)


def namespace_to_path(namespace: Namespace) -> str:
    return SEPARATOR.join(namespace)


def key_validate(key: Any, *, field: str = "key") -> str:
    """A key as stored: a non-empty string in NFC, at most MAX_KEY_BYTES in UTF-8."""
    if not isinstance(key, str):
        raise _refuse(field, "must be a string.")
    if not key:
        raise _refuse(field, "cannot be empty.")
    if not text_storable(key):
        raise _refuse(field, "cannot contain NUL or a lone surrogate.")
    key = _nfc(key)
    if _utf8_length(key) > MAX_KEY_BYTES:
        raise _refuse(field, f"is longer than {MAX_KEY_BYTES} bytes.")
    return key


def literal_head(pattern: Namespace) -> Namespace:
    """The labels of a prefix pattern before its first wildcard: an index-usable prefix."""
    head = []
    for label in pattern:
        if label == WILDCARD:
            break
        head.append(label)
    return tuple(head)


def pattern_regex(pattern: Namespace, *, match: str) -> str:
    """A regular expression over the dotted path matching whole labels.

    "*" matches exactly one label. Written in the subset that PostgreSQL's
    regular expressions and Python's `re` (Django's REGEXP on SQLite) read the
    same way: \\A, \\Z, [^.], escaped literals.
    """
    body = r"\.".join(r"[^.]+" if label == WILDCARD else _regex_literal(label) for label in pattern)
    if match == "suffix":
        return rf"(\A|\.){body}\Z"
    return rf"\A{body}(\.|\Z)"


def _regex_literal(label: str) -> str:
    # Escape every non-alphanumeric character with a backslash: both engines read
    # "\<punctuation>" as that character, and neither needs more than that.
    return "".join(ch if ch.isalnum() else "\\" + ch for ch in label)
