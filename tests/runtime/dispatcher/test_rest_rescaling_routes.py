"""``PATCH /jobs/{jobid}/rescaling`` and ``GET /jobs/{jobid}/rescaling/{triggerid}`` on a real
Dispatcher (no Spark): the token, 202 with a trigger id, the status of the request for its own
job only, an unknown job, a bad parallelism."""

from __future__ import annotations

from tests.runtime.test_rest_app import AUTH, WAIT, rest, waiting_job  # noqa: F401 (fixture)
from tests.waiting import wait_value


def test_a_rescaling_is_triggered_and_its_failure_read_with_the_token(rest) -> None:  # noqa: F811
    job_id = waiting_job(rest.client)
    path = f"/jobs/{job_id}/rescaling"
    assert rest.client.patch(path, params={"parallelism": 2}).status_code == 401
    triggered = rest.client.patch(path, params={"parallelism": 2}, headers=AUTH)
    assert triggered.status_code == 202, triggered.text
    status_path = f"{path}/{triggered.json()['request-id']}"
    assert rest.client.get(status_path).status_code == 401
    status = wait_value(
        lambda: rest.client.get(status_path, headers=AUTH),
        lambda answer: answer.json()["status"] != "IN_PROGRESS",
        what="the rescaling to finish (it fails: the job's task never runs)",
        timeout=WAIT,
    )
    body = status.json()
    assert body["status"] == "COMPLETED" and "not every task is RUNNING" in body["failure-cause"]
    other = waiting_job(rest.client)
    assert (
        rest.client.get(
            f"/jobs/{other}/rescaling/{triggered.json()['request-id']}", headers=AUTH
        ).status_code
        == 404
    )


def test_an_unknown_job_or_a_bad_parallelism_is_refused(rest) -> None:  # noqa: F811
    unknown = rest.client.patch("/jobs/abc/rescaling", params={"parallelism": 2}, headers=AUTH)
    assert unknown.status_code == 404 and "abc" in unknown.json()["errors"][0]
    job_id = waiting_job(rest.client)
    for bad in ({"parallelism": 0}, {}):
        answer = rest.client.patch(f"/jobs/{job_id}/rescaling", params=bad, headers=AUTH)
        assert answer.status_code == 422, answer.text
