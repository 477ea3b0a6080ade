from django.apps import AppConfig


class StoreAppConfig(AppConfig):
    name = "store_app"
    verbose_name = "Long-term store"
    default_auto_field = "django.db.models.BigAutoField"
