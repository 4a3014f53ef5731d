"""High availability: JobManager leader election, leader retrieval and the stores a new leader
recovers jobs from, on ZooKeeper through kazoo (seed 003; Flink's ZooKeeper HA services)."""
