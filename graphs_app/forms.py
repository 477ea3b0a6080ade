"""Forms of the graph pages: shapes only. The services decide what may be stored."""

from __future__ import annotations

from django import forms

from memoryadmin.errors import DomainError

from .models import NAME_MAX
from .specs import MAX_SPEC_TEXT

SPEC_ATTRS = {"class": "spec-json", "rows": 28, "spellcheck": "false", "autocomplete": "off", "aria-label": "Graph definition (JSON)"}


class GraphForm(forms.Form):
    """A new graph: a name and its JSON."""

    name = forms.CharField(max_length=NAME_MAX, strip=True)
    spec = forms.CharField(max_length=MAX_SPEC_TEXT, strip=False, widget=forms.Textarea(attrs=SPEC_ATTRS))


class SpecForm(forms.Form):
    """A saved graph's new JSON (renaming is a form of its own)."""

    spec = forms.CharField(max_length=MAX_SPEC_TEXT, strip=False, widget=forms.Textarea(attrs=SPEC_ATTRS))


class RenameForm(forms.Form):
    name = forms.CharField(max_length=NAME_MAX, strip=True)


class LangGraphForm(forms.Form):
    """What ``compiled.get_graph().to_json()`` printed, to convert into a definition."""

    langgraph = forms.CharField(max_length=MAX_SPEC_TEXT, strip=False)


def form_add_domain_error(form: forms.Form, exc: DomainError) -> None:
    """Show a service's 400/409 on the form: ``spec.nodes[2].id`` lands on ``spec``."""
    if not exc.fields:
        form.add_error(None, exc.message)
        return
    for key, problems in exc.fields.items():
        field = key.split(".", 1)[0].split("[", 1)[0]
        target = field if field in form.fields else None
        for problem in problems if isinstance(problems, list) else [problems]:
            text = f"{key}: {problem}" if key != field or target is None else str(problem)
            form.add_error(target, text)
