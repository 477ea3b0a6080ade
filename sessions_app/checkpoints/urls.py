"""The checkpoint pages of a thread, under /threads/<thread_id>/checkpoints/."""

from django.urls import path

from . import views

urlpatterns = [
    path("", views.checkpoint_timeline, name="thread-checkpoints"),
    path("fork", views.checkpoint_fork, name="thread-checkpoints-fork"),
    path("branches", views.checkpoint_branches, name="thread-checkpoints-branches"),
    path("release", views.checkpoint_release, name="thread-checkpoints-release"),
]
