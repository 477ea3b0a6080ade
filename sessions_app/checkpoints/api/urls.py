"""Checkpoint endpoints, and the thread resource as LangGraph's server has it."""

from django.urls import path

from . import threads, views

urlpatterns = [
    path("threads", threads.ThreadListView.as_view(), name="api-thread-list"),
    # Before threads/<thread_id>: "search" is an action, not a thread id (as in LangGraph's server).
    path("threads/search", views.ThreadSearchView.as_view(), name="api-thread-search"),
    path("threads/count", threads.ThreadCountView.as_view(), name="api-thread-count"),
    path("threads/<str:thread_id>", threads.ThreadDetailView.as_view(), name="api-thread-detail"),
    path("threads/<str:thread_id>/checkpoints", views.CheckpointListView.as_view(), name="api-checkpoint-list"),
    # Before checkpoints/<checkpoint_id>: "latest" is reserved, never a checkpoint id.
    path("threads/<str:thread_id>/checkpoints/latest", views.CheckpointLatestView.as_view(), name="api-checkpoint-latest"),
    path(
        "threads/<str:thread_id>/checkpoints/<str:checkpoint_id>",
        views.CheckpointDetailView.as_view(),
        name="api-checkpoint-detail",
    ),
    path(
        "threads/<str:thread_id>/checkpoints/<str:checkpoint_id>/writes",
        views.CheckpointWritesView.as_view(),
        name="api-checkpoint-writes",
    ),
    path("threads/<str:thread_id>/release", views.CheckpointReleaseView.as_view(), name="api-checkpoint-release"),
    path("threads/<str:thread_id>/copy", views.ThreadCopyView.as_view(), name="api-thread-copy"),
    path("threads/<str:thread_id>/state", views.ThreadStateView.as_view(), name="api-thread-state"),
    # Before state/<checkpoint_id>: LangGraph's SDK posts a checkpoint config to state/checkpoint.
    path("threads/<str:thread_id>/state/checkpoint", views.ThreadStateCheckpointView.as_view(), name="api-thread-state-checkpoint"),
    path("threads/<str:thread_id>/state/<str:checkpoint_id>", views.ThreadStateAtView.as_view(), name="api-thread-state-at"),
    path("threads/<str:thread_id>/history", views.ThreadHistoryView.as_view(), name="api-thread-history"),
    path("checkpoints/prune", views.CheckpointPruneView.as_view(), name="api-checkpoint-prune"),
    path("checkpoints/delete-for-runs", views.CheckpointDeleteForRunsView.as_view(), name="api-checkpoint-delete-for-runs"),
]

# Last of all the API's routes (memoryadmin/urls.py): what no route under threads/ matched.
# A path without "/" after threads/ is a thread's (threads/<thread_id>), so this takes the rest.
refused_thread_paths = [
    path("threads/<path:rest>", threads.ThreadIdRefusedView.as_view(), name="api-thread-id-refused"),
]
