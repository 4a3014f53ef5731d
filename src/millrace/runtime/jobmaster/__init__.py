"""The JobMaster of one job and its input split assignment."""
