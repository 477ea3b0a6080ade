"""DRF authentication by API key: `Authorization: Bearer <key>` or `X-Api-Key: <key>`."""

from __future__ import annotations

from rest_framework import authentication, exceptions

from .apikeys import apikey_authenticate


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        raw = request.META.get("HTTP_X_API_KEY", "").strip()
        if not raw:
            header = request.META.get("HTTP_AUTHORIZATION", "")
            scheme, _, value = header.partition(" ")
            if scheme.lower() != "bearer":
                return None
            raw = value.strip()
        if not raw:
            raise exceptions.AuthenticationFailed("Empty API key.")
        key = apikey_authenticate(raw)
        if key is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        return (key.owner, key)

    def authenticate_header(self, request) -> str:
        # Makes DRF answer 401 (not 403) when no credentials are given.
        return 'Bearer realm="memoryadmin"'
