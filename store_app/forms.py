"""Dashboard forms of the store browser. They parse; the rules are in matching and selectors."""

from __future__ import annotations

from django import forms

from memoryadmin.errors import InvalidInput
from memoryadmin.json import DepthExceeded
from memoryadmin.json import loads as json_loads
from memoryadmin.jsoncheck import DEPTH_MAX

from .matching import MAX_QUERY_CHARS, filter_validate


class StoreSearchForm(forms.Form):
    q = forms.CharField(required=False, max_length=MAX_QUERY_CHARS, strip=True, label="Text")
    filter = forms.CharField(
        required=False,
        max_length=4000,
        strip=True,
        label="Filter (JSON)",
        widget=forms.TextInput(attrs={"placeholder": '{"confidence": {"$gte": 0.7}}'}),
    )

    def clean_filter(self):
        raw = self.cleaned_data["filter"]
        if not raw:
            return None
        try:
            # The API's parser: strict JSON, exact integers, and no nesting deeper than a filter may be.
            parsed = json_loads(raw, depth_max=DEPTH_MAX, field="filter")
        except DepthExceeded as exc:
            raise forms.ValidationError(str(exc)) from exc
        except ValueError as exc:
            raise forms.ValidationError(f"Not JSON: {exc}") from exc
        try:
            filter_validate(parsed)
        except InvalidInput as exc:
            raise forms.ValidationError(exc.message) from exc
        return parsed

    @property
    def searching(self) -> bool:
        return self.is_valid() and bool(self.cleaned_data.get("q") or self.cleaned_data.get("filter"))
