"""The upload page: several trace files at once, then a status page that updates itself."""

import uuid

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from deviations.core.errors import TooLargeError, UserError
from deviations.core.forms import form_error
from ingest.forms import TraceUploadForm
from ingest.runs import ThreadOptions
from ingest.submit import submit_uploads
from ingest.upload_handlers import check_upload_size


@login_required
def upload(request: HttpRequest) -> HttpResponse:
    wants_json = "application/json" in request.headers.get("Accept", "")
    if request.method != "POST":
        return render(request, "ingest/upload.html", {"form": TraceUploadForm()})
    form = TraceUploadForm(request.POST, request.FILES)
    try:
        check_upload_size(request)
        if form.is_valid():
            data = form.cleaned_data
            submission = submit_uploads(
                data["series"],
                data["release"],
                [(f.name, f) for f in data["files"]],
                ThreadOptions(data["thread_name"], data["process_name"], data["all_threads"]),
                order=data["order"],
                user=request.user,
            )
            url = reverse("upload_status", args=[submission.batch])
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
    return render(request, "ingest/upload.html", {"form": form}, status=status)


def upload_status(request: HttpRequest, batch: uuid.UUID) -> HttpResponse:
    return render(request, "ingest/upload_status.html", {"batch": batch})
