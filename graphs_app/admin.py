from django.contrib import admin

from .models import GraphDefinition


@admin.register(GraphDefinition)
class GraphDefinitionAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "valid", "node_count", "updated_at")
    list_filter = ("valid",)
    search_fields = ("name", "owner__username")
    list_select_related = ("owner",)
    # Writes go through graphs_app.services (name and spec checks, ownership); the admin only reads.
    readonly_fields = ("name", "owner", "spec", "valid", "node_count", "created_at", "updated_at")

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # deletes go through graph_delete, which records them in the audit log
