"""DeathWatch: heartbeats and the phi-accrual failure detector (seed 000, 001)."""

from millrace.runtime.heartbeat.heartbeat_manager import HeartbeatListener, HeartbeatManager
from millrace.runtime.heartbeat.phi_accrual_failure_detector import PhiAccrualFailureDetector

__all__ = ["HeartbeatListener", "HeartbeatManager", "PhiAccrualFailureDetector"]
