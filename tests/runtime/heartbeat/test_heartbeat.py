"""Phi-accrual failure detection and the HeartbeatManager, on a ManualClock (no sleeps)."""

from __future__ import annotations

import pytest

from millrace.clock import ManualClock
from millrace.runtime.heartbeat import HeartbeatManager, PhiAccrualFailureDetector

INTERVAL, PAUSE, THRESHOLD = 1.0, 10.0, 12.0  # seed 000's defaults for a 10 s ask timeout


def regular_detector(clock: ManualClock, beats: int = 30) -> PhiAccrualFailureDetector:
    detector = PhiAccrualFailureDetector(clock, THRESHOLD, PAUSE, INTERVAL)
    detector.heartbeat()
    for _ in range(beats):
        clock.advance(INTERVAL)
        detector.heartbeat()
    return detector


def test_phi_stays_low_within_the_acceptable_pause() -> None:
    clock = ManualClock()
    detector = regular_detector(clock)
    clock.advance(PAUSE)
    assert detector.phi() < 1.0
    assert detector.is_available()


def test_target_is_suspected_soon_after_pause_plus_interval() -> None:
    clock = ManualClock()
    detector = regular_detector(clock)
    clock.advance(PAUSE + INTERVAL + 1.0)
    assert not detector.is_available()


def test_phi_grows_monotonically_with_silence() -> None:
    clock = ManualClock()
    detector = regular_detector(clock)
    values = []
    for _ in range(30):
        clock.advance(0.5)
        values.append(detector.phi())
    assert values == sorted(values)
    assert values[-1] > THRESHOLD


def test_irregular_heartbeats_widen_the_tolerance() -> None:
    steady, jittery = ManualClock(), ManualClock()
    a = regular_detector(steady)
    b = PhiAccrualFailureDetector(jittery, THRESHOLD, PAUSE, INTERVAL)
    b.heartbeat()
    for i in range(30):
        jittery.advance(0.2 if i % 2 else 1.8)
        b.heartbeat()
    steady.advance(PAUSE + 1.5)
    jittery.advance(PAUSE + 1.5)
    assert b.phi() < a.phi()


def test_invalid_parameters_are_rejected() -> None:
    with pytest.raises(ValueError):
        PhiAccrualFailureDetector(ManualClock(), 0, PAUSE, INTERVAL)


class Owner:
    """Runs scheduled ticks when the clock passes them; records timeouts."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.due: list[tuple[float, object]] = []
        self.timeouts: list[str] = []

    def schedule(self, fn, delay: float) -> None:
        self.due.append((self.clock.monotonic() + delay, fn))

    def run_until(self, t: float) -> None:
        while True:
            ready = sorted((d for d in self.due if d[0] <= t), key=lambda d: d[0])
            if not ready:
                break
            due, fn = ready[0]
            self.due.remove(ready[0])
            self.clock.advance(due - self.clock.monotonic())
            fn()
        self.clock.advance(max(0.0, t - self.clock.monotonic()))

    def notify_heartbeat_timeout(self, resource_id: str) -> None:
        self.timeouts.append(resource_id)


def manager(owner: Owner) -> HeartbeatManager:
    return HeartbeatManager(owner.clock, owner.schedule, owner, INTERVAL, PAUSE, THRESHOLD)


def test_answering_target_stays_monitored_and_silent_one_times_out_once() -> None:
    owner = Owner(ManualClock())
    hb = manager(owner)
    requests = {"alive": 0, "silent": 0}

    def request(name: str):
        def send() -> None:
            requests[name] += 1
            if name == "alive":
                hb.receive_heartbeat(name)

        return send

    hb.monitor_target("alive", request("alive"))
    hb.monitor_target("silent", request("silent"))
    hb.start()
    owner.run_until(PAUSE)
    assert owner.timeouts == []
    owner.run_until(PAUSE + 2 * INTERVAL + 1)
    assert owner.timeouts == ["silent"]
    assert hb.monitored == ["alive"]
    owner.run_until(60)
    assert owner.timeouts == ["silent"]  # told once
    assert requests["alive"] >= 55


def test_a_target_that_resumes_before_the_threshold_survives() -> None:
    owner = Owner(ManualClock())
    hb = manager(owner)
    answering = {"on": True}
    hb.monitor_target("tm", lambda: answering["on"] and hb.receive_heartbeat("tm"))
    hb.start()
    owner.run_until(20)
    answering["on"] = False  # SIGSTOP-like pause shorter than the acceptable pause
    owner.run_until(20 + PAUSE - 2)
    answering["on"] = True
    owner.run_until(60)
    assert owner.timeouts == []


def test_unmonitored_and_stopped_targets_are_not_reported() -> None:
    owner = Owner(ManualClock())
    hb = manager(owner)
    hb.monitor_target("gone", lambda: None)
    hb.start()
    hb.unmonitor_target("gone")
    owner.run_until(60)
    assert owner.timeouts == []
    hb.monitor_target("later", lambda: None)
    hb.stop()
    owner.run_until(120)
    assert owner.timeouts == []
