from django.apps import AppConfig


class GraphsAppConfig(AppConfig):
    name = "graphs_app"
    verbose_name = "Graph definitions"
    default_auto_field = "django.db.models.BigAutoField"
