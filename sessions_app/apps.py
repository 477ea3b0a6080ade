from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    label = "sessions_app"
    verbose_name = "Threads and conversation state"
    default_auto_field = "django.db.models.BigAutoField"
