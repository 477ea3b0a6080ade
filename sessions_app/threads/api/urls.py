"""Conversation-state endpoints of a thread: agent state, messages, clear."""

from django.urls import path

from . import views

urlpatterns = [
    path("threads/<str:thread_id>/agent-state", views.AgentStateView.as_view(), name="api-agent-state"),
    path("threads/<str:thread_id>/agent-state/append", views.AgentStateAppendView.as_view(), name="api-agent-state-append"),
    path("threads/<str:thread_id>/messages", views.ThreadMessagesView.as_view(), name="api-thread-messages"),
    path("threads/<str:thread_id>/clear", views.ThreadClearView.as_view(), name="api-thread-clear"),
]
