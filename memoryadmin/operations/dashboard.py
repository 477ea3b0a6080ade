"""The home dashboard's numbers, scoped to the viewer, in a constant number of queries.

Members see their own threads and items; operators and admins see everything
(memoryadmin.policy). Every figure is computed here, in SQL and Python; the template
only draws it (the bar chart is SVG geometry computed below, no chart library).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta

from django.db.models import Count, Q, Sum, Value
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from memoryadmin import policy
from memoryadmin.selectors import audit_recent

from sessions_app.checkpoints.models import Checkpoint
from sessions_app.checkpoints.status import FAILED, INTERRUPTED
from sessions_app.threads.models import Block, Thread

DAYS = 14
RECENT = 8
CHART_WIDTH = 560
CHART_HEIGHT = 120
CHART_GAP = 6


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    value: int


@dataclass(frozen=True)
class Day:
    day: date
    saves: int
    rewrites: int
    save_bar: Bar
    rewrite_bar: Bar
    label_x: float

    @property
    def label(self) -> str:
        return self.day.strftime("%d")


@dataclass
class Activity:
    days: list[Day] = field(default_factory=list)
    peak: int = 0
    width: int = CHART_WIDTH
    height: int = CHART_HEIGHT

    @property
    def total_saves(self) -> int:
        return sum(day.saves for day in self.days)

    @property
    def total_rewrites(self) -> int:
        return sum(day.rewrites for day in self.days)


@dataclass
class Dashboard:
    threads: int
    interrupted: int
    failed: int
    active_blocks: int
    archived_blocks: int
    checkpoints: int
    store_items: int
    recent: list[Thread]
    activity: Activity
    audit: list


def _per_day(qs, column: str, start: datetime, *, distinct: bool) -> dict[date, int]:
    rows = (
        qs.filter(**{f"{column}__gte": start})
        .annotate(day=TruncDate(column))
        .values("day")
        .annotate(n=Count(column, distinct=distinct) if distinct else Count("id"))
        .order_by()
    )
    return {row["day"]: row["n"] for row in rows}


def _chart(days: list[date], saves: dict[date, int], rewrites: dict[date, int]) -> Activity:
    peak = max([*saves.values(), *rewrites.values(), 0])
    slot = CHART_WIDTH / len(days)
    bar_width = (slot - CHART_GAP) / 2
    scale = (CHART_HEIGHT - 14) / peak if peak else 0
    activity = Activity(peak=peak)
    for index, day in enumerate(days):
        x = index * slot + CHART_GAP / 2
        bars = []
        for offset, value in ((0, saves.get(day, 0)), (bar_width, rewrites.get(day, 0))):
            height = round(value * scale, 1)
            bars.append(Bar(x=round(x + offset, 1), y=round(CHART_HEIGHT - height, 1), width=round(bar_width, 1), height=height, value=value))
        activity.days.append(
            Day(day=day, saves=bars[0].value, rewrites=bars[1].value, save_bar=bars[0], rewrite_bar=bars[1], label_x=round(x + bar_width, 1))
        )
    return activity


def dashboard_for(*, actor, now: datetime | None = None) -> Dashboard:
    """Counts (threads interrupted or failed among them), recent threads, 14 days of messages saved
    and rewrites, recent audit events (admins).

    Eight queries for members and operators, nine for admins, whatever the data size,
    and one statement more when the recent threads include other users' (their
    titles are message text: one `thread.list` audit event per read window).
    """
    from store_app.models import StoreItem

    now = now or timezone.now()
    threads = Thread.objects.visible_to(actor)
    totals = threads.aggregate(
        n=Count("id"),
        active=Coalesce(Sum("active_count"), Value(0)),
        archived=Coalesce(Sum("archived_count"), Value(0)),
        # LangGraph threads stopped where a human or a node is awaited, or on an error (the
        # status stored on the row, docs/checkpoints.md "Status"): in the same pass.
        interrupted=Count("id", filter=Q(lg_status=INTERRUPTED)),
        failed=Count("id", filter=Q(lg_status=FAILED)),
    )
    blocks = policy.restrict(Block.objects.all(), actor, owner_field="thread__owner")
    checkpoints = policy.restrict(Checkpoint.objects.all(), actor, owner_field="thread__owner")
    today = timezone.localdate(now)
    days = [today - timedelta(days=offset) for offset in range(DAYS - 1, -1, -1)]
    start = timezone.make_aware(datetime.combine(days[0], time.min))
    # Messages saved: blocks written that day (a save records no row of its own, and a
    # retried save writes nothing). Rewrites: a rewrite (compaction, edit or clear) stamps
    # every block it archives with one instant, so distinct instants count rewrites exactly.
    saves = _per_day(blocks, "created_at", start, distinct=False)
    rewrites = _per_day(blocks.filter(archived=True), "archived_at", start, distinct=True)
    recent = list(threads.select_related("owner").order_by("-updated_at", "-id")[:RECENT])
    policy.record_bulk_read(
        actor, action="thread.list", kind="threads", rows=recent, filters={"view": "home"},
        name_of=lambda thread: thread.thread_id,
    )
    return Dashboard(
        threads=totals["n"],
        interrupted=totals["interrupted"],
        failed=totals["failed"],
        active_blocks=totals["active"],
        archived_blocks=totals["archived"],
        checkpoints=checkpoints.count(),
        store_items=StoreItem.objects.visible_to(actor).live(now).count(),
        recent=recent,
        activity=_chart(days, saves, rewrites),
        audit=audit_recent(actor=actor),
    )
