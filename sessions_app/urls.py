"""The app's pages, one module per domain."""

from django.urls import include, path

urlpatterns = [
    path("", include("sessions_app.threads.urls")),
    path("threads/<str:thread_id>/checkpoints/", include("sessions_app.checkpoints.urls")),
    path("threads/<str:thread_id>/", include("sessions_app.turns.urls")),
]
