"""OpenAPI description of our authentication (loaded by the app config)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "memoryadmin.auth.ApiKeyAuthentication"
    name = ["ApiKeyBearer", "ApiKeyHeader"]

    def get_security_definition(self, auto_schema):
        return [
            {"type": "http", "scheme": "bearer", "description": "An API key: `Authorization: Bearer ma_…`"},
            {"type": "apiKey", "in": "header", "name": "X-Api-Key", "description": "The same key in `X-Api-Key`."},
        ]
