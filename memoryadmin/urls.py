from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from sessions_app.checkpoints.api.urls import refused_thread_paths

from . import accounts_views, audit_views, views

api_v1 = [
    path("", include("sessions_app.api.urls")),
    path("", include("store_app.api.urls")),
    path("", include("graphs_app.api.urls")),
    path("", include("memoryadmin.operations.api.urls")),
    # After every route: a path under threads/ none of them took (a thread id holding "/").
    *refused_thread_paths,
]

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("metrics", views.metrics, name="metrics"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("django-admin/", admin.site.urls),
    path("audit/", audit_views.audit_log, name="audit-log"),
    path("audit/export", audit_views.audit_export, name="audit-export"),
    path("keys/", accounts_views.key_list, name="key-list"),
    path("keys/create", accounts_views.key_create, name="key-create"),
    path("keys/revoke", accounts_views.key_revoke, name="key-revoke"),
    path("users/", accounts_views.user_list, name="user-list"),
    path("users/create", accounts_views.user_create, name="user-create"),
    path("users/role", accounts_views.user_role, name="user-role"),
    path("", include("memoryadmin.operations.urls")),
    path("", include("sessions_app.urls")),
    path("store/", include("store_app.urls")),
    path("graphs/", include("graphs_app.urls")),
]

handler403 = "memoryadmin.errorviews.forbidden"
handler404 = "memoryadmin.errorviews.not_found"
handler500 = "memoryadmin.errorviews.server_error"
