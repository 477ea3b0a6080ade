"""Django admin for the core models.

The audit log is shown read-only, never edited or deleted. Users keep Django's own
admin, with one addition: a role change made there (the user's role groups or the
superuser flag) is an audit event, as it is from the command line.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin

from . import roles
from .audit import audit_record
from .models import AuditEvent

_ROLE_BEFORE = "_memoryadmin_role_before"


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ("created_at", "actor_name", "action", "target", "ip")
    list_filter = ("action",)
    search_fields = ("actor_name", "target")
    date_hierarchy = "created_at"
    readonly_fields = ("created_at", "actor", "actor_name", "action", "target", "detail", "ip")
    actions = None

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


def _current_role(user) -> str | None:
    fresh = type(user).objects.filter(pk=user.pk).first()
    return roles.role_of(fresh) if fresh is not None else None


class AuditedUserAdmin(UserAdmin):
    """Django's user admin; a change of role through it is recorded (`user.role_set`)."""

    def save_model(self, request, obj, form, change):
        setattr(request, _ROLE_BEFORE, _current_role(obj) if change else None)
        super().save_model(request, obj, form, change)

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        user = form.instance
        before, after = getattr(request, _ROLE_BEFORE, None), _current_role(user)
        if before != after:
            audit_record(
                actor=request.user,
                action="user.role_set",
                target=f"user:{user.get_username()}",
                detail={"before": before, "after": after, "via": "django-admin"},
                request=request,
            )


User = get_user_model()
if admin.site.is_registered(User):
    admin.site.unregister(User)
admin.site.register(User, AuditedUserAdmin)
