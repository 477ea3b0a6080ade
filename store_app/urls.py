from django.urls import path

from . import views

urlpatterns = [
    path("", views.store_browser, name="store-browser"),
    path("tree", views.store_tree, name="store-tree"),
    path("item", views.store_item_detail, name="store-item"),
    path("item/delete", views.store_item_delete, name="store-item-delete"),
    path("subtree", views.store_subtree_preview, name="store-subtree-preview"),
    path("subtree/delete", views.store_subtree_delete, name="store-subtree-delete"),
]
