"""A standby JobManager's REST API sends every request to the leader's, or 503 without one."""

from __future__ import annotations

from fastapi.testclient import TestClient

from millrace.runtime.dispatcher.standby_rest import create_standby_rest_app


def test_every_request_is_redirected_to_the_same_path_at_the_leader_keeping_the_method() -> None:
    client = TestClient(create_standby_rest_app(lambda: "http://127.0.0.1:9999"))
    for method in ("GET", "POST", "PATCH"):
        response = client.request(method, "/jobs/abc?mode=cancel", follow_redirects=False)
        assert response.status_code == 307
        assert response.headers["location"] == "http://127.0.0.1:9999/jobs/abc?mode=cancel"


def test_without_a_leader_the_standby_answers_503_with_retry_after() -> None:
    client = TestClient(create_standby_rest_app(lambda: None))
    response = client.get("/overview", follow_redirects=False)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    assert "no JobManager leads" in response.json()["errors"][0]
