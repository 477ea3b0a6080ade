from django.apps import AppConfig


class StoreAppConfig(AppConfig):
    name = "store_app"
    verbose_name = "Long-term store"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from .expressions import on_connection_created

        # SQLite has no jsonb or full-text search: the store's filter, ranking and
        # namespace functions are registered on each of its connections instead.
        connection_created.connect(on_connection_created, dispatch_uid="store_app.sqlite_functions")
