"""Operations pages: the home dashboard, search, export, bulk actions, retention, erase.

Bulk routes live under /bulk/, not /threads/, because "bulk" is a valid thread id.
"""

from django.urls import path

from . import views

urlpatterns = [
    path("", views.home, name="home"),
    path("search/", views.message_search, name="message-search"),
    path("threads/<str:thread_id>/export", views.thread_export, name="thread-export"),
    path("bulk/preview", views.bulk_preview, name="bulk-preview"),
    path("bulk/start", views.bulk_start, name="bulk-start"),
    path("bulk/export", views.bulk_export, name="bulk-export"),
    path("bulk/exports/<int:job_id>/", views.export_job, name="export-job"),
    path("bulk/exports/<int:job_id>/download", views.export_job_download, name="export-job-download"),
    path("bulk/<int:job_id>/", views.bulk_job, name="bulk-job"),
    path("retention/", views.retention_page, name="retention"),
    path("retention/policies", views.retention_policy_save, name="retention-policy-save"),
    path("retention/policies/delete", views.retention_policy_delete, name="retention-policy-delete"),
    path("retention/dry-run", views.retention_dry_run, name="retention-dry-run"),
    path("retention/apply", views.retention_apply, name="retention-apply"),
    path("erase/", views.user_erase, name="user-erase"),
    path("erase/jobs/<int:job_id>/", views.user_erase_job, name="user-erase-job"),
]
