"""The run configuration as data, at the bottom of the house: its sections and fields
(`sections`, with the embedding spec's check, and `run_config`, with the numbers commands take
that are not settings), what each field says about its flag, variable and file key
(`fields`), and loading in order of precedence (`loading`). It builds nothing: the builder in
mulligan/runs/ makes components from it."""
