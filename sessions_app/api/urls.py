from django.urls import path

from . import checkpoint_views as cv
from . import turn_views as tv
from . import views

urlpatterns = [
    path("threads", views.ThreadListView.as_view(), name="api-thread-list"),
    # Before threads/<thread_id>: "search" is an action, not a thread id (as in LangGraph's server).
    path("threads/search", cv.ThreadSearchView.as_view(), name="api-thread-search"),
    path("threads/<str:thread_id>", views.ThreadDetailView.as_view(), name="api-thread-detail"),
    path("threads/<str:thread_id>/agent-state", views.AgentStateView.as_view(), name="api-agent-state"),
    path("threads/<str:thread_id>/messages", views.ThreadMessagesView.as_view(), name="api-thread-messages"),
    path("threads/<str:thread_id>/clear", views.ThreadClearView.as_view(), name="api-thread-clear"),
    path("threads/<str:thread_id>/checkpoints", cv.CheckpointListView.as_view(), name="api-checkpoint-list"),
    # Before checkpoints/<checkpoint_id>: "latest" is reserved, never a checkpoint id.
    path("threads/<str:thread_id>/checkpoints/latest", cv.CheckpointLatestView.as_view(), name="api-checkpoint-latest"),
    path(
        "threads/<str:thread_id>/checkpoints/<str:checkpoint_id>",
        cv.CheckpointDetailView.as_view(),
        name="api-checkpoint-detail",
    ),
    path(
        "threads/<str:thread_id>/checkpoints/<str:checkpoint_id>/writes",
        cv.CheckpointWritesView.as_view(),
        name="api-checkpoint-writes",
    ),
    path("threads/<str:thread_id>/release", cv.CheckpointReleaseView.as_view(), name="api-checkpoint-release"),
    path("threads/<str:thread_id>/copy", cv.ThreadCopyView.as_view(), name="api-thread-copy"),
    path("threads/<str:thread_id>/state", cv.ThreadStateView.as_view(), name="api-thread-state"),
    # Before state/<checkpoint_id>: LangGraph's SDK posts a checkpoint config to state/checkpoint.
    path("threads/<str:thread_id>/state/checkpoint", cv.ThreadStateCheckpointView.as_view(), name="api-thread-state-checkpoint"),
    path("threads/<str:thread_id>/state/<str:checkpoint_id>", cv.ThreadStateAtView.as_view(), name="api-thread-state-at"),
    path("threads/<str:thread_id>/history", cv.ThreadHistoryView.as_view(), name="api-thread-history"),
    path("threads/<str:thread_id>/turns", tv.TurnsView.as_view(), name="api-turns"),
    path("threads/<str:thread_id>/turns/pending", tv.TurnPendingView.as_view(), name="api-turn-pending"),
    path("threads/<str:thread_id>/turns/pending/chunks", tv.TurnChunksView.as_view(), name="api-turn-chunks"),
    path("threads/<str:thread_id>/turns/pending/finish", tv.TurnFinishView.as_view(), name="api-turn-finish"),
    path("threads/<str:thread_id>/turns/restart", tv.TurnRestartView.as_view(), name="api-turn-restart"),
    path("threads/<str:thread_id>/context-preview", tv.ContextPreviewView.as_view(), name="api-context-preview"),
    path("checkpoints/prune", cv.CheckpointPruneView.as_view(), name="api-checkpoint-prune"),
    path("checkpoints/delete-for-runs", cv.CheckpointDeleteForRunsView.as_view(), name="api-checkpoint-delete-for-runs"),
]
