"""Forms of the series pages: the owners' commit settings."""

from typing import Any

from django import forms

from deviations.core.forms import validated
from deviations.core.versions import (
    MAX_LOG_URL_TEMPLATE,
    MAX_REVISION,
    check_log_url_template,
    check_revision,
)


class CommitSettingsForm(forms.Form):
    """A series' log-URL template and, optionally, one release's revision."""

    log_url_template = forms.CharField(
        max_length=MAX_LOG_URL_TEMPLATE, required=False, label="Log URL template",
        help_text="e.g. https://github.com/o/r/compare/{from}...{to} or "
        "https://chromium.googlesource.com/chromium/src/+log/{from}..{to}; "
        "empty: no link.",
        widget=forms.TextInput(attrs={"size": 70}),
    )
    release = forms.ChoiceField(required=False, choices=[])
    revision = forms.CharField(max_length=MAX_REVISION, required=False,
                               help_text="commit hash or number; empty clears it")

    def __init__(self, *args: Any, versions: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["release"].choices = [("", "(no change)")] + [(v, v) for v in versions]

    def clean_log_url_template(self) -> str:
        value: str = self.cleaned_data["log_url_template"].strip()
        return validated(check_log_url_template, value) if value else ""

    def clean_revision(self) -> str:
        value: str = self.cleaned_data["revision"].strip()
        return validated(check_revision, value) if value else ""
