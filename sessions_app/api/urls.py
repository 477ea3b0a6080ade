"""The app's API routes, one module per domain. The checkpoint domain's come first: it
holds `threads/search`, which must match before `threads/<thread_id>`."""

from django.urls import include, path

urlpatterns = [
    path("", include("sessions_app.checkpoints.api.urls")),
    path("", include("sessions_app.threads.api.urls")),
    path("", include("sessions_app.turns.api.urls")),
]
