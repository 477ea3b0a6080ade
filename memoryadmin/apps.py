from django.apps import AppConfig


class MemoryAdminConfig(AppConfig):
    name = "memoryadmin"
    verbose_name = "memoryadmin core"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import roles

        roles.connect_signals()
