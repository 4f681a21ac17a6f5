"""Running the loop: the one builder from the run configuration (`build`), a run's
lifecycle and manifest (`lifecycle`), the runner over tasks and its executors (threads,
Ray)."""
