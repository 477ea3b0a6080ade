from django.urls import path

from . import views

urlpatterns = [
    path("", views.graph_list, name="graph-list"),
    path("new/", views.graph_new, name="graph-new"),
    path("preview", views.graph_preview, name="graph-preview"),
    path("convert", views.graph_convert, name="graph-convert"),
    path("<int:graph_id>/", views.graph_detail, name="graph-detail"),
    path("<int:graph_id>/rename", views.graph_rename, name="graph-rename"),
    path("<int:graph_id>/delete", views.graph_delete, name="graph-delete"),
    path("thread/<str:thread_id>/", views.thread_graph, name="thread-graph"),
]
