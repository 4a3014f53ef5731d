"""The TaskManager side: TaskExecutor endpoint, slots, tasks."""
