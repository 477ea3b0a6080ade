"""Static files in production: whitenoise's compressed manifest once collected, the sources before.

`manage.py collectstatic` writes the files with content hashes in their names (cached for
good by browsers) and gzip copies, listed in STATIC_ROOT/staticfiles.json. Without that
manifest the manifest storage cannot name a single file, so every page would fail as a
500. Until it exists, this storage names each file by its own path and whitenoise serves
it from the apps' static directories (settings: WHITENOISE_USE_FINDERS), uncompressed and
briefly cached; the server says so when it starts (memoryadmin/wsgi.py).
"""

from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


class CollectedOrSourceStaticFilesStorage(CompressedManifestStaticFilesStorage):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.collected = bool(self.hashed_files) or self.read_manifest() is not None

    def post_process(self, *args, **kwargs):
        yield from super().post_process(*args, **kwargs)
        if not kwargs.get("dry_run"):
            self.collected = True

    def stored_name(self, name: str) -> str:
        if not self.collected:
            return name
        return super().stored_name(name)
