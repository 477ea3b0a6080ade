from django.urls import include, path

from . import views

urlpatterns = [
    path("", views.home, name="home"),
    path("", include("sessions_app.urls_ops")),
    path("threads/", views.thread_list, name="thread-list"),
    path("threads/<str:thread_id>/", views.thread_detail, name="thread-detail"),
    path("threads/<str:thread_id>/clear", views.thread_clear, name="thread-clear"),
    path("threads/<str:thread_id>/delete", views.thread_delete, name="thread-delete"),
    path("threads/<str:thread_id>/checkpoints/", include("sessions_app.checkpoint_views")),
    path("threads/<str:thread_id>/", include("sessions_app.turn_pages")),
]
