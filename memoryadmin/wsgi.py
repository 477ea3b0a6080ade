import logging
import os

from django.conf import settings
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryadmin.settings")
application = get_wsgi_application()

if not settings.DEBUG and not settings.TESTING and not settings.STATIC_COLLECTED:
    logging.getLogger("memoryadmin").warning(
        "Static files are not collected in %s: serving them from the apps' directories, uncompressed. "
        "Run `manage.py collectstatic` for compressed files with cache-busting names.",
        settings.STATIC_ROOT,
    )
