"""The app's pages, one module per domain."""

from django.urls import include, path

from .checkpoints import listing

urlpatterns = [
    # The thread list filters by status, read from checkpoints: its page sits with them.
    path("threads/", listing.thread_list, name="thread-list"),
    path("thread-views/", listing.saved_view_save, name="saved-view-save"),
    path("thread-views/<int:view_id>/delete", listing.saved_view_delete, name="saved-view-delete"),
    path("", include("sessions_app.threads.urls")),
    path("threads/<str:thread_id>/checkpoints/", include("sessions_app.checkpoints.urls")),
    path("threads/<str:thread_id>/", include("sessions_app.turns.urls")),
]
