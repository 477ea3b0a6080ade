from django.urls import path

from . import views

urlpatterns = [
    path("store/items", views.StoreItemsView.as_view(), name="api-store-items"),
    path("store/items/search", views.StoreSearchView.as_view(), name="api-store-search"),
    path("store/namespaces", views.StoreNamespacesView.as_view(), name="api-store-namespaces"),
    path("store/batch", views.StoreBatchView.as_view(), name="api-store-batch"),
]
