from django.urls import path

from . import views

urlpatterns = [
    path("graphs/compile", views.GraphCompileView.as_view(), name="api-graph-compile"),
    path("graphs", views.GraphListView.as_view(), name="api-graph-list"),
    path("graphs/<int:graph_id>", views.GraphDetailView.as_view(), name="api-graph-detail"),
]
