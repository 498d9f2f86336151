"""The form that creates a canary from the browser (its checks are the service's)."""

from django import forms

from deviations.experiments.canaries.models import Canary


class CanaryForm(forms.Form):
    name = forms.CharField(max_length=200)
    metric = forms.CharField(max_length=200, required=False,
                             help_text="e.g. PlayDelay, first contentful paint")
    unit = forms.CharField(max_length=40, required=False, help_text="e.g. ms")
    bad = forms.ChoiceField(choices=Canary.BAD, label="Which direction is bad")
    alpha = forms.FloatField(initial=0.05, help_text="False-alarm probability over the whole "
                             "run, however often you look.")
    tau = forms.FloatField(required=False, label="Tolerance τ", help_text="0-1, on the "
                           "distribution functions: accept 'no difference beyond τ'. Empty: "
                           "never accept.")
    method = forms.ChoiceField(
        choices=[("", "default: rank betting test, or distribution functions with τ or "
                  "quantiles"), *Canary.METHODS], initial="", required=False,
        label="Sequential test")

    def clean_method(self) -> str | None:
        return self.cleaned_data.get("method") or None
    count = forms.BooleanField(required=False, label="Count metric (send event timestamps)")
    quantile = forms.FloatField(initial=0.95, help_text="Quantile worded besides the median.")
    quantiles = forms.CharField(
        required=False, label="Judge on quantiles", help_text="Comma-separated, e.g. "
        "0.5,0.9,0.99: an anytime-valid decision each decides the canary (leave τ empty and "
        "the test 'distribution functions'). Empty: not used.")

    def clean_quantiles(self) -> list[float]:
        text = self.cleaned_data.get("quantiles") or ""
        try:
            return [float(part) for part in text.split(",") if part.strip()]
        except ValueError:
            raise forms.ValidationError(
                "comma-separated probabilities, e.g. 0.5,0.9,0.99") from None
    resolution = forms.FloatField(
        initial=Canary.DEFAULT_RESOLUTION, required=False, label="Resolution (relative)",
        help_text="Values "
        "are rounded down to steps of this relative size (memory bounded, the false-alarm "
        "guarantee kept; smaller changes not seen). 0: exact.")

    def clean_resolution(self) -> float:
        value = self.cleaned_data.get("resolution")
        return Canary.DEFAULT_RESOLUTION if value is None else value
    min_effect = forms.FloatField(required=False, label="Smallest change worth knowing",
                                  help_text="On the median, in the metric's unit. With the "
                                  "rank betting test its bets are tuned to it (on the bad "
                                  "side only when a direction is bad): it decides sooner "
                                  "near that change.")
    owners = forms.CharField(required=False, help_text="Emails told of a rejection, "
                             "comma-separated.")
