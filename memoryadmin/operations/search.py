"""Full-text search over message content (docs/operations.md, "Search").

PostgreSQL: `to_tsvector('simple', translate(content, '<>', '  ')) @@
websearch_to_tsquery('simple', q)`, served by the GIN expression index of
migration 0004 (so the expression here must stay exactly the indexed one; the
brackets are blanked because PostgreSQL's parser drops what it reads as markup). SQLite: the FTS5 table of the same
migration. Any other case (an SQLite built without FTS5, the table missing):
every word as a case-insensitive substring, correct but unindexed.

The 'simple' configuration lowercases and splits words without stemming or
stop words: agents write in every language, and a search for "run" should not
silently match "running" in one language only. On both databases every word of
the query must occur in the message; PostgreSQL also understands web-search
syntax ("a phrase", or, -word).

Members search their own threads only; operators and admins search everyone's,
and such a search is one audit event (`thread.search`) with the count and the
filter, naming the other users' threads it showed (memoryadmin.policy).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from functools import lru_cache
from typing import Any, Mapping

from django.db import connection
from django.db.models import BooleanField, QuerySet
from django.db.models.expressions import RawSQL
from django.urls import reverse
from django.utils import timezone

from memoryadmin import policy
from memoryadmin.errors import InvalidInput
from memoryadmin.params import CURSOR_MAX, parse_choice, parse_date

from sessions_app.threads.models import Block

QUERY_MAX = 200
OWNER_MAX = 150  # a username
AGENT_MAX = 64  # an agent code
PAGE_SIZE = 50
PAGE_SIZE_MAX = 200
BEFORE_MAX = CURSOR_MAX
SNIPPET_RADIUS = 120
ROLES = tuple(Block.Role.values)
WORD_RE = re.compile(r"\w+", re.UNICODE)
FTS_TABLE = "sessions_app_block_fts"


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def _text_param(params: Mapping[str, Any], name: str, limit: int) -> str:
    """A text filter, trimmed; longer than `limit` as sent is a 400 (a cut filter would match something else)."""
    value = params.get(name) or ""
    if len(value) > limit:
        raise InvalidInput(f"{name} is longer than {limit} characters.", fields={name: [f"at most {limit} characters."]})
    return value.strip()


@dataclass(frozen=True)
class MessageQuery:
    """A search and its filters, as kept in the page's URL (and the API's query string)."""

    q: str = ""
    owner: str = ""
    agent: str = ""
    role: str = ""
    archived: str = "all"
    since: date | None = None
    until: date | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any], *, agent_param: str = "agent") -> "MessageQuery":
        q = _text_param(params, "q", QUERY_MAX)
        # Exactly as the page's selects send them; empty is "any" (role) or "all" (archived).
        role = parse_choice(params.get("role") or None, "role", ROLES, "")
        archived = parse_choice(params.get("archived") or None, "archived", ("all", "false", "true"), "all")
        # A range that ends before it starts is not an error: it matches nothing.
        since = parse_date(params.get("since"), name="since")
        until = parse_date(params.get("until"), name="until")
        owner = _text_param(params, "owner", OWNER_MAX)
        agent = _text_param(params, agent_param, AGENT_MAX)
        for name, value in (("q", q), ("owner", owner), (agent_param, agent)):
            if "\x00" in value:
                raise InvalidInput(f"{name} holds a NUL character.", fields={name: ["holds a NUL character."]})
        return cls(
            q=q,
            owner=owner,
            agent=agent,
            role=role,
            archived=archived,
            since=since,
            until=until,
        )

    def as_params(self) -> dict[str, str]:
        params = {
            "q": self.q,
            "owner": self.owner,
            "agent": self.agent,
            "role": self.role,
            "archived": "" if self.archived == "all" else self.archived,
            "since": self.since.isoformat() if self.since else "",
            "until": self.until.isoformat() if self.until else "",
        }
        return {key: value for key, value in params.items() if value}

    @property
    def words(self) -> list[str]:
        return WORD_RE.findall(self.q)


@lru_cache(maxsize=4)
def _fts5_ready(alias: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = %s", [FTS_TABLE])
        return cursor.fetchone() is not None


def search_backend() -> str:
    """Which engine answers: "postgresql", "fts5" or "substring"."""
    if connection.vendor == "postgresql":
        return "postgresql"
    if connection.vendor == "sqlite" and _fts5_ready(connection.alias):
        return "fts5"
    return "substring"


def _fts5_query(words: list[str]) -> str:
    # Each word quoted, so FTS5 reads none of them as an operator (AND, NEAR, column:).
    return " ".join('"' + word.replace('"', '""') + '"' for word in words)


def _match(qs: QuerySet[Block], query: MessageQuery) -> QuerySet[Block]:
    words = query.words
    if not words:
        return qs.none()
    backend = search_backend()
    table = Block._meta.db_table
    if backend == "postgresql":
        return qs.filter(
            RawSQL(
                f"to_tsvector('simple'::regconfig, translate(\"{table}\".\"content\", '<>', '  '))"
                " @@ websearch_to_tsquery('simple'::regconfig, %s)",
                [query.q],
                output_field=BooleanField(),
            )
        )
    if backend == "fts5":
        return qs.filter(id__in=RawSQL(f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s", [_fts5_query(words)]))
    for word in words:
        qs = qs.filter(content__icontains=word)
    return qs


def message_search_queryset(*, actor, query: MessageQuery) -> QuerySet[Block]:
    """Blocks matching the query that the actor may read, newest first."""
    qs = policy.restrict(Block.objects.select_related("thread", "thread__owner"), actor, owner_field="thread__owner")
    qs = policy.filter_by_owner(qs, actor, query.owner, owner_field="thread__owner")
    if query.agent:
        qs = qs.filter(agent_code=query.agent)
    if query.role:
        qs = qs.filter(role=query.role)
    if query.archived != "all":
        qs = qs.filter(archived=query.archived == "true")
    if query.since:
        qs = qs.filter(created_at__gte=_day_start(query.since))
    if query.until and query.until < date.max:
        qs = qs.filter(created_at__lt=_day_start(query.until + timedelta(days=1)))
    return _match(qs, query).order_by("-id")


@dataclass(frozen=True)
class Hit:
    block: Block
    before: str
    match: str
    after: str

    @property
    def url(self) -> str:
        return block_url(self.block)


@dataclass
class SearchPage:
    hits: list[Hit] = field(default_factory=list)
    older: int | None = None  # `before` for the next page


def block_url(block: Block) -> str:
    """The block in its thread page: the right tab, the page that holds it, its anchor."""
    base = reverse("thread-detail", args=[block.thread.thread_id])
    params = []
    if block.archived:
        params.append("tab=archived")
    # Pages list blocks after a seq; start a few blocks before this one to show its context.
    after = block.seq - 3
    if after > 0:
        params.append(f"after={after}")
    return f"{base}{'?' + '&'.join(params) if params else ''}#seq-{block.seq}"


def snippet(content: str, words: list[str]) -> tuple[str, str, str]:
    """(text before, the first matching word, text after), cut around the first match."""
    lowered = content.lower()
    best = -1
    length = 0
    for word in words:
        position = lowered.find(word.lower())
        if position != -1 and (best == -1 or position < best):
            best, length = position, len(word)
    if best == -1:
        text = content[: SNIPPET_RADIUS * 2]
        return text + ("…" if len(content) > len(text) else ""), "", ""
    start = max(0, best - SNIPPET_RADIUS)
    end = min(len(content), best + length + SNIPPET_RADIUS)
    before = ("…" if start > 0 else "") + content[start:best]
    after = content[best + length : end] + ("…" if end < len(content) else "")
    return before, content[best : best + length], after


def message_search(*, actor, query: MessageQuery, before: int | None = None, limit: int = PAGE_SIZE, request=None) -> SearchPage:
    """One page of matching messages, keyset-paginated on the block id: one query at any depth.

    An operator's or admin's search that shows other users' messages is one
    audit event (one statement) with the count and the filter, naming the
    threads it showed; the same page asked again within the read window adds none.
    """
    if not query.words:
        return SearchPage()
    qs = message_search_queryset(actor=actor, query=query)
    if before is not None:
        qs = qs.filter(id__lt=before)
    rows = list(qs[: limit + 1])
    blocks = rows[:limit]
    words = query.words
    hits = [Hit(block, *snippet(block.content, words)) for block in blocks]
    policy.record_bulk_read(
        actor,
        action="thread.search",
        kind="search",
        rows=blocks,
        filters={**query.as_params(), "before": before, "limit": limit},
        owner_id_of=lambda block: block.thread.owner_id,
        name_of=lambda block: block.thread.thread_id,
    )
    return SearchPage(hits=hits, older=blocks[-1].pk if len(rows) > limit else None)
