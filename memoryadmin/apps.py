from django.apps import AppConfig


class MemoryAdminConfig(AppConfig):
    name = "memoryadmin"
    verbose_name = "memoryadmin core"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import apikeys, roles, schema  # noqa: F401  (schema registers the OpenAPI auth extension)

        roles.connect_signals()
        apikeys.connect_signals()
