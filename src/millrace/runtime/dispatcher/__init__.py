"""The Dispatcher: job submission, one JobMaster per job."""
