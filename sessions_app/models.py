"""The app's models, defined in its domains; Django and the migrations find them here."""

from .checkpoints.models import Checkpoint, CheckpointValue, CheckpointWrite, SavedThreadView
from .threads.models import THREAD_ID_RE, TITLE_MAX, Block, Thread, ThreadQuerySet, ThreadScoped, thread_rows_delete
from .turns.models import Turn, TurnChunk, TurnStreamLease, turns_delete

__all__ = [
    "THREAD_ID_RE", "TITLE_MAX", "Block", "Checkpoint", "CheckpointValue", "CheckpointWrite", "SavedThreadView", "Thread", "ThreadQuerySet",
    "ThreadScoped", "Turn", "TurnChunk", "TurnStreamLease", "thread_rows_delete", "turns_delete",
]
