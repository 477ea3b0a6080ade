"""Prometheus metrics. Counters of the conversation store are bumped on commit."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

BLOCK_TRUNCATE = Counter(
    "block_truncate_count", "Saves that rewrote a thread's context (compaction or in-place edit)."
)
BLOCK_ARCHIVE_WRITE = Counter("block_archive_write_count", "Blocks archived by rewrites and clears.")
BLOCK_APPEND = Counter("block_append_count", "Blocks appended by saves.")
BLOCK_PERSIST_FAIL = Counter("block_persist_fail", "Agent-state saves that failed (refused or errored).")
HTTP_REQUESTS = Counter("http_requests", "HTTP requests served.", ["method", "route", "status"])
HTTP_LATENCY = Histogram(
    "http_request_duration_seconds",
    "HTTP request latency.",
    ["method", "route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
