"""OpenAPI description of our authentication and of rules across fields (loaded by the app config)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerExtension
from drf_spectacular.plumbing import get_class


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "memoryadmin.auth.ApiKeyAuthentication"
    name = ["ApiKeyBearer", "ApiKeyHeader"]

    def get_security_definition(self, auto_schema):
        return [
            {"type": "http", "scheme": "bearer", "description": "An API key: `Authorization: Bearer ma_…`"},
            {"type": "apiKey", "in": "header", "name": "X-Api-Key", "description": "The same key in `X-Api-Key`."},
        ]


class SchemaKeywordsExtension(OpenApiSerializerExtension):
    """A serializer's `openapi_keywords` (e.g. `anyOf` for "name, spec or both") join its schema.

    Serializers describe fields one by one; a rule across fields that the service
    enforces must be in the schema too, or clients (and the fuzz test) send what is refused.
    """

    target_class = "rest_framework.serializers.Serializer"
    match_subclasses = True

    @classmethod
    def _matches(cls, target) -> bool:
        return super()._matches(target) and hasattr(get_class(target), "openapi_keywords")

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        return {**schema, **self.target.openapi_keywords}


ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "machine-readable reason, e.g. invalid, forbidden, not_found"},
        "detail": {"description": "what went wrong, for people"},
        "errors": {
            "type": "object",
            "additionalProperties": {"type": "array", "items": {}},
            "description": "field errors, keyed by the field (e.g. context[3].role)",
        },
    },
    "required": ["code", "detail"],
}
ERROR_RESPONSES = {
    "400": "Bad input: the body, a parameter or a field is wrong; nothing was written.",
    "401": "No API key, or an unknown or revoked one.",
    "403": "Another user's object, or an action this role may not take; recorded in the audit log.",
    "404": "No such object.",
    "409": "Conflicts with what exists (a duplicate name or id, a concurrent change).",
    "411": "A body without Content-Length (chunked) sent to a server that cannot read one; nothing was written.",
    "413": "The body is larger than the configured limit.",
    "429": "Too many requests for this API key; see Retry-After.",
    "503": "The database is not answering; see Retry-After.",
}


# "." and ".." are path steps (clients resolve them before sending), reserved like "search".
THREAD_ID_SCHEMA = {"type": "string", "pattern": "^(?!(?:search|\\.|\\.\\.)$)[A-Za-z0-9_.:@$-]{1,64}$", "minLength": 1, "maxLength": 64}


def add_error_responses(result, generator, request, public):
    """Document the error answers every endpoint can give, with one shared Error schema.

    Also gives every `thread_id` path parameter its pattern, so the schema says
    what the server accepts wherever a thread is named.
    """
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            for parameter in operation.get("parameters", []):
                if parameter.get("in") == "path" and parameter.get("name") == "thread_id":
                    parameter["schema"] = dict(THREAD_ID_SCHEMA)
            for status, response in operation["responses"].items():
                if status[0] in "45" and "content" not in response:
                    response["content"] = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
            for status, description in ERROR_RESPONSES.items():
                operation["responses"].setdefault(
                    status,
                    {
                        "description": description,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                    },
                )
    return result
