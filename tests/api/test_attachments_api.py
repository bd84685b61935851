"""A request's files through the API: attach, list, download, and refusals."""

from __future__ import annotations

import hashlib

import pytest

from tests.approvals.test_attachments import EXE, PDF, upload


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


class TestThroughTheApi:
    def test_attach_list_and_download(self, api_as, manager_task):
        carol = api_as("carol")
        attached = carol.client.post(
            f"/api/v1/tasks/{manager_task.pk}/attachments",
            {"files": [upload("quote.pdf", PDF)]},
            headers=carol.headers,
        )

        assert attached.status_code == 201, attached.content
        [out] = attached.json()
        assert (out["name"], out["content_type"]) == ("quote.pdf", "application/pdf")
        assert out["sha256"] == hashlib.sha256(PDF).hexdigest()
        listed = carol.get(f"/requests/{manager_task.run_id}/attachments").json()
        assert [item["id"] for item in listed] == [out["id"]]
        download = carol.client.get(out["url"], headers=carol.headers)
        assert b"".join(download.streaming_content) == PDF

    def test_a_refused_file_is_422_saying_why(self, api_as, manager_task):
        carol = api_as("carol")

        refused = carol.client.post(
            f"/api/v1/requests/{manager_task.run_id}/attachments",
            {"files": [upload("run.pdf", EXE)]},
            headers=carol.headers,
        )

        assert refused.status_code == 422
        assert "whatever its name says" in refused.json()["detail"]

    def test_a_request_you_may_not_see_is_404(self, api_as, manager_task):
        eve = api_as("eve")

        assert eve.get(f"/requests/{manager_task.run_id}/attachments").status_code == 404
