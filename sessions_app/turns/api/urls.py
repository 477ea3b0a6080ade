"""Live-turn endpoints of a thread and its context preview."""

from django.urls import path

from . import views

urlpatterns = [
    path("threads/<str:thread_id>/turns", views.TurnsView.as_view(), name="api-turns"),
    path("threads/<str:thread_id>/turns/pending", views.TurnPendingView.as_view(), name="api-turn-pending"),
    path("threads/<str:thread_id>/turns/pending/chunks", views.TurnChunksView.as_view(), name="api-turn-chunks"),
    path("threads/<str:thread_id>/turns/pending/finish", views.TurnFinishView.as_view(), name="api-turn-finish"),
    path("threads/<str:thread_id>/turns/restart", views.TurnRestartView.as_view(), name="api-turn-restart"),
    path("threads/<str:thread_id>/context-preview", views.ContextPreviewView.as_view(), name="api-context-preview"),
]
