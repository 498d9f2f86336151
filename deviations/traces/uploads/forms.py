from typing import Any

from django import forms

from deviations.core.forms import validated
from deviations.core.versions import (
    MAX_ORDER,
    MAX_REVISION,
    check_revision,
    check_series_name,
    check_version,
)


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """A file input that takes several files; cleans to a list of uploaded files."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> list[Any]:
        items = data if isinstance(data, list | tuple) else ([data] if data else [])
        if not items:
            raise forms.ValidationError("Choose at least one trace file.", code="required")
        return [super(MultipleFileField, self).clean(item, initial) for item in items]


class TraceUploadForm(forms.Form):
    series = forms.CharField(
        max_length=100, help_text="e.g. chromium-linux.example-load",
        widget=forms.TextInput(attrs={"list": "series-names", "autocomplete": "off"}),
    )
    release = forms.CharField(
        max_length=100, required=False,
        help_text="e.g. 56.0.2909.0 or 20161020030211 (not needed for a CSV of results "
        "whose rows name their releases)")
    order = forms.IntegerField(
        required=False, min_value=0, max_value=MAX_ORDER,
        help_text="Optional: sort by this number, not the version.",
    )
    revision = forms.CharField(
        max_length=MAX_REVISION, required=False, strip=True,
        help_text="Optional: the commit hash or number the release was built from.",
    )
    thread_name = forms.CharField(max_length=200, initial="CrRendererMain")
    process_name = forms.CharField(max_length=200, initial="Renderer")
    all_threads = forms.BooleanField(required=False, help_text="Measure every thread.")
    # allow_empty_file: an empty file among several becomes a failed run naming it (as in
    # the API and the CLI) instead of refusing the others with it.
    files = MultipleFileField(
        required=False, allow_empty_file=True,
        help_text="One trace per run (.json, .json.gz, .pftrace, .perfetto-trace), or benchmark "
        "results (.json, .csv, .log): the format is read from each file.",
        widget=MultipleFileInput(attrs={
            "accept": ".json,.gz,.pftrace,.perfetto-trace,.csv,.log,.txt,application/json,"
                      "application/gzip,text/csv"}),
    )

    def clean_series(self) -> str:
        value: str = self.cleaned_data["series"].strip()
        return validated(check_series_name, value)

    def clean_release(self) -> str:
        value: str = self.cleaned_data["release"].strip()
        return validated(check_version, value) if value else ""

    def clean_revision(self) -> str:
        value: str = self.cleaned_data["revision"]
        return validated(check_revision, value) if value else ""
