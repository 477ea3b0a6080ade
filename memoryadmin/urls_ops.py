"""Operations routes: the audit log pages, and the API endpoints of export and search.

Included from memoryadmin/urls.py at the root; the thread pages of operations
(home, bulk, export, search, retention, erase) are in sessions_app/urls_ops.py.
"""

from django.urls import path

from sessions_app.api import ops_views

from . import audit_views

urlpatterns = [
    path("audit/", audit_views.audit_log, name="audit-log"),
    path("audit/export", audit_views.audit_export, name="audit-export"),
    path("api/v1/search/messages", ops_views.MessageSearchView.as_view(), name="api-search-messages"),
    path("api/v1/threads/<str:thread_id>/export", ops_views.ThreadExportView.as_view(), name="api-thread-export"),
]
