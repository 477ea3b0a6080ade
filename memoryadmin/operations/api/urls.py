"""Operations endpoints: full-text message search and a thread's export bundle."""

from django.urls import path

from . import views

urlpatterns = [
    path("search/messages", views.MessageSearchView.as_view(), name="api-search-messages"),
    path("threads/<str:thread_id>/export", views.ThreadExportView.as_view(), name="api-thread-export"),
]
