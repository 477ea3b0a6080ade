from django.apps import AppConfig


class OperationsConfig(AppConfig):
    """Work over many threads and the store: retention, bulk actions, erase, export, search."""

    name = "memoryadmin.operations"
    label = "operations"
    default_auto_field = "django.db.models.BigAutoField"
