"""The thread pages: a thread, its clear and delete actions (the list is sessions_app.checkpoints.listing)."""

from django.urls import path

from . import views

urlpatterns = [
    path("threads/<str:thread_id>/", views.thread_detail, name="thread-detail"),
    path("threads/<str:thread_id>/clear", views.thread_clear, name="thread-clear"),
    path("threads/<str:thread_id>/delete", views.thread_delete, name="thread-delete"),
]
