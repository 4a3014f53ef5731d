"""The dashboard in headless Chromium on a standalone cluster of real processes (a JobManager,
two TaskManagers, Spark) running the flight-delays job over a directory with checkpoints: the
pages show the job, its vertices with the records REST reports, a completed checkpoint and the
TaskManagers; a savepoint triggered from the page completes; cancel from the page is refused
without the token (the job runs on) and cancels the job with it.

One cluster and one browser serve the module's tests, in order (cancel last). Screenshots are
saved in each test's directory (and to docs/images/ by scripts/dashboard_screenshots.sh).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.dashboard_browser import chromium_context, go, number, open_page, screenshot
from tests.integration.directory_job import directory_job, rest_auth
from tests.integration.standalone_cluster import StandaloneCluster
from tests.waiting import wait_until, wait_value

pytestmark = [pytest.mark.slow, pytest.mark.spark]

NAME = "flight delays <dashboard>"


@pytest.fixture(scope="module")
def running(spark, flights_dir, tmp_path_factory) -> Iterator[tuple[StandaloneCluster, str]]:
    """A cluster and the id of an unbounded job on it, checkpointing every second; one month of
    flights arrives, so the figures stop moving once it is processed."""
    work = tmp_path_factory.mktemp("dashboard")
    settings = {"execution.checkpointing.interval": "1 s", "source.discovery-interval": "200 ms"}
    with directory_job(spark, flights_dir, work, NAME, settings) as (cluster, job_id):
        cluster.wait_until(lambda: cluster.job(job_id).get("state") == "RUNNING")
        yield cluster, job_id


@pytest.fixture(scope="module")
def browser(tmp_path_factory) -> Iterator[Any]:
    with chromium_context(tmp_path_factory.mktemp("profile")) as context:
        yield context


@pytest.fixture
def page(browser, running) -> Iterator[Any]:
    cluster, _ = running
    opened = open_page(browser, f"http://127.0.0.1:{cluster.rest_port}/")
    yield opened
    errors = opened.errors
    opened.close()
    assert errors == [], f"script errors: {errors}"


def token(cluster: StandaloneCluster) -> str:
    return rest_auth(cluster)["Authorization"].removeprefix("Bearer ")


def shown_records(page: Any) -> dict[str, tuple[int, int]]:
    """Records in and out per vertex, as the vertex table shows them."""
    shown = {}
    for row in page.locator('[data-testid="vertex-row"]').all():
        name = row.get_attribute("data-vertex-name")
        cells = [
            row.locator(f'[data-field="{f}"]').inner_text()
            for f in ("read-records", "write-records")
        ]
        shown[name] = (number(cells[0]), number(cells[1]))
    return shown


def rest_records(job: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {
        v["name"]: (v["metrics"]["read-records"], v["metrics"]["write-records"])
        for v in job["vertices"]
    }


def test_the_overview_and_the_job_list_show_the_job(running, page, tmp_path) -> None:
    _, job_id = running
    go(page, "#/overview")
    wait_until(
        lambda: page.inner_text("#overview-taskmanagers") == "2",
        what="2 TaskManagers on the overview",
        timeout=30,
    )
    assert number(page.inner_text("#overview-slots-total")) == 4
    assert number(page.inner_text("#overview-jobs-running")) == 1
    row = page.locator(f'[data-testid="job-row"][data-jid="{job_id}"]')
    assert row.locator('[data-field="name"]').inner_text() == NAME
    assert row.locator('[data-field="state"]').inner_text() == "RUNNING"
    screenshot(page, tmp_path, "overview")
    row.locator("a").click()
    wait_until(lambda: page.locator("#job-name").count() == 1, what="the job page", timeout=30)
    assert page.inner_text("#job-name") == NAME


def test_the_job_page_shows_the_vertices_and_the_records_rest_reports(
    running, page, tmp_path
) -> None:
    cluster, job_id = running
    go(page, f"#/jobs/{job_id}")
    vertices = cluster.job(job_id)["vertices"]
    assert page.locator('[data-testid="dag-node"]').count() == len(vertices) >= 2
    names = {
        n.get_attribute("data-vertex-name") for n in page.locator('[data-testid="dag-node"]').all()
    }
    assert names == {v["name"] for v in vertices}
    # The same figures as REST's: the page polls, so wait until one of its refreshes shows
    # what REST answers at that moment (and the month's records have been read).
    matched = wait_value(
        lambda: (rest_records(cluster.job(job_id)), shown_records(page)),
        lambda both: both[0] == both[1] and all(i > 0 for i, _ in both[0].values()),
        what="the page's records to equal REST's",
        timeout=180,
    )
    assert sum(i for i, _ in matched[0].values()) > 0
    assert page.inner_text("#job-state") == "RUNNING"
    screenshot(page, tmp_path, "job")


def test_the_checkpoints_tab_shows_a_completed_checkpoint(running, page, tmp_path) -> None:
    cluster, job_id = running
    go(page, f"#/jobs/{job_id}/checkpoints")
    completed = page.locator('[data-testid="checkpoint-row"][data-status="COMPLETED"]')
    wait_until(lambda: completed.count() > 0, what="a completed checkpoint row", timeout=120)
    first = completed.first
    checkpoint_id = int(first.get_attribute("data-checkpoint-id") or -1)
    rest = cluster.rest(f"/jobs/{job_id}/checkpoints")
    assert checkpoint_id in {c["id"] for c in rest["history"] if c["status"] == "COMPLETED"}
    assert (
        number(page.inner_text('[data-testid="checkpoint-counts"] [data-field="completed"]')) >= 1
    )
    screenshot(page, tmp_path, "checkpoints")


def test_the_taskmanagers_page_shows_the_registered_taskmanagers(running, page, tmp_path) -> None:
    cluster, _ = running
    go(page, "#/taskmanagers")
    rows = page.locator('[data-testid="tm-row"]')
    shown = {r.get_attribute("data-tm-id") for r in rows.all()}
    assert shown == {t["id"] for t in cluster.taskmanagers()}
    screenshot(page, tmp_path, "taskmanagers")
    tm = sorted(shown)[0]
    go(page, f"#/taskmanagers/{tm}")
    assert page.inner_text('[data-testid="tm-id"]') == tm
    screenshot(page, tmp_path, "taskmanager")


def test_a_savepoint_triggered_from_the_page_completes(running, page) -> None:
    cluster, job_id = running
    go(page, f"#/jobs/{job_id}")
    page.fill("#token-input", token(cluster))
    page.click("#token-save")
    page.click("#action-savepoint")
    status = page.locator("#action-status")
    wait_until(
        lambda: status.get_attribute("data-kind") in ("ok", "error"),
        what="the savepoint's outcome on the page",
        timeout=120,
    )
    assert status.get_attribute("data-kind") == "ok", status.inner_text()
    assert "Savepoint completed: " in status.inner_text()
    history = cluster.rest(f"/jobs/{job_id}/checkpoints")["history"]
    assert any(c["is_savepoint"] and c["status"] == "COMPLETED" for c in history)


def test_cancel_is_refused_without_the_token_and_cancels_with_it(running, page, tmp_path) -> None:
    cluster, job_id = running
    go(page, f"#/jobs/{job_id}")
    page.click("#token-clear")  # sessionStorage is the tab's: a new page starts without one
    assert page.inner_text("#token-state") == "no token"
    page.click("#action-cancel")
    status = page.locator("#action-status")
    wait_until(lambda: "Refused (401)" in status.inner_text(), what="the refusal", timeout=30)
    screenshot(page, tmp_path, "cancel-refused")
    assert cluster.job(job_id)["state"] == "RUNNING"
    page.fill("#token-input", token(cluster))
    page.click("#token-save")
    page.click("#action-cancel")
    wait_until(lambda: status.inner_text() == "Cancel requested.", what="cancel", timeout=30)
    cluster.wait_until(lambda: cluster.job(job_id)["state"] == "CANCELED", what="CANCELED")
    wait_until(
        lambda: page.inner_text("#job-state") == "CANCELED",
        what="the page to show CANCELED",
        timeout=30,
    )
    screenshot(page, tmp_path, "cancelled")
