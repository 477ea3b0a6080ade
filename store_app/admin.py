from django.contrib import admin

from .models import StoreItem


@admin.register(StoreItem)
class StoreItemAdmin(admin.ModelAdmin):
    """Read-only: writes go through the store's services (ownership, validation, audit)."""

    list_display = ("namespace_path", "key", "owner", "updated_at", "expires_at")
    list_filter = ("depth",)
    search_fields = ("namespace_path", "key", "owner__username")
    list_select_related = ("owner",)
    readonly_fields = ("owner", "namespace_path", "depth", "key", "value", "ttl", "expires_at", "created_at", "updated_at")
    ordering = ("-updated_at", "-id")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
