"""The JobMaster's side of sources: one SourceCoordinator per source vertex."""
