"""The live-turn and context pages of a thread, under /threads/<thread_id>/."""

from django.urls import path

from . import views

urlpatterns = [
    path("context/", views.context_preview_page, name="thread-context-preview"),
    path("turns/", views.turns_panel, name="thread-turns-panel"),
    path("turns/stream", views.turns_stream, name="thread-turns-stream"),
]
