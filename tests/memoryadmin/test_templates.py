"""Every template's source as Django reads it: no comment or tag left in the page as text.

Django's `{# … #}` comment ends on its own line; one spanning lines is not a comment and
reaches the page as written (a `{% comment %}` block is the multi-line form). The same holds
for a tag or a variable broken across lines.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.template.base import Lexer, TokenType

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted(
    path for path in ROOT.glob("**/templates/**/*.html") if ".venv" not in path.parts and "node_modules" not in path.parts
)


def test_templates_are_found():
    assert len(TEMPLATES) > 20


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda path: str(path.relative_to(ROOT)))
def test_no_template_syntax_reaches_the_page_as_text(path):
    for token in Lexer(path.read_text()).tokenize():
        if token.token_type is TokenType.TEXT:
            for opening in ("{#", "{%", "{{"):
                assert opening not in token.contents, f"{path.name} line {token.lineno}: {opening} spans lines"
