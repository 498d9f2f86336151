"""The upload page: several trace files at once, then a status page that updates itself."""

import uuid

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from deviations.core import access
from deviations.core.errors import TooLargeError, UserError
from deviations.core.forms import form_error
from deviations.core.models import Ownership
from deviations.core.uploads import check_upload_size
from deviations.traces.models import Series
from deviations.traces.uploads.forms import TraceUploadForm
from deviations.traces.uploads.results import results_upload, submit_results
from deviations.traces.uploads.runs import ThreadOptions
from deviations.traces.uploads.submit import submit_uploads


def _page(request: HttpRequest, form: TraceUploadForm, status: int = 200) -> HttpResponse:
    series = Series.objects.order_by("name").values_list("name", flat=True)[:500]
    return render(request, "deviations/upload.html", {"form": form, "series_names": series},
                  status=status)


@login_required
def upload(request: HttpRequest) -> HttpResponse:
    wants_json = "application/json" in request.headers.get("Accept", "")
    if request.method != "POST":
        return _page(request, TraceUploadForm())
    form = TraceUploadForm(request.POST, request.FILES)
    try:
        check_upload_size(request)
        if form.is_valid():
            data = form.cleaned_data
            if results_upload(data["series"], data["files"]):
                batch = uuid.uuid4()
                done = submit_results(
                    data["series"], [(f.name, f) for f in data["files"]],
                    release=data["release"] or None, order=data["order"], user=request.user,
                    batch=batch, revision=data["revision"] or None,
                )
                unlisted = [u.error for u in done if u.error and u.failed is None]
                if unlisted:  # no release to list them under on the status page
                    stored = sum(u.stored is not None for u in done)
                    raise UserError(f"{stored} file(s) stored; refused: " + "; ".join(unlisted))
            else:
                if not data["release"]:
                    raise UserError("release: give the release these traces are runs of")
                batch = submit_uploads(
                    data["series"],
                    data["release"],
                    [(f.name, f) for f in data["files"]],
                    ThreadOptions(data["thread_name"], data["process_name"],
                                  data["all_threads"]),
                    order=data["order"],
                    user=request.user,
                    revision=data["revision"] or None,
                ).batch
            url = reverse("upload_status", args=[batch])
            return JsonResponse({"status_url": url}) if wants_json else redirect(url)
        status = 400
    except TooLargeError as exc:
        form.add_error("files", form_error(exc))
        status = 400  # the form is shown again with the error (static/js/upload.js reads it)
    except UserError as exc:
        form.add_error(None, form_error(exc))
        status = exc.status
    if wants_json:
        return JsonResponse({"errors": form.errors.get_json_data()}, status=status)
    return _page(request, form, status)


@login_required
def upload_check(request: HttpRequest) -> JsonResponse:
    """What the upload page asks before it sends a byte: are the series, release and order
    valid, may this user write to the series, and is it a new one (a typo would make one)?"""
    form = TraceUploadForm(request.GET)
    form.is_valid()
    errors = {k: v for k, v in form.errors.get_json_data().items()
              if k in ("series", "release", "order")}
    name = form.cleaned_data.get("series")
    new_series = False
    if name and "series" not in errors:
        new_series = not Series.objects.filter(name=name).exists()
        try:
            access.check_write(request.user, Ownership.SERIES, [name])
        except UserError as exc:
            errors["series"] = [{"message": exc.message, "code": exc.code}]
    return JsonResponse({"errors": errors, "new_series": new_series},
                        status=400 if errors else 200)


def upload_status(request: HttpRequest, batch: uuid.UUID) -> HttpResponse:
    return render(request, "deviations/upload_status.html", {"batch": batch})
