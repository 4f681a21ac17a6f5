"""The run configuration as data, at the bottom of the house: its sections and fields
(`sections`, `run_config`), what each field says about its flag, variable and file key
(`fields`), loading in order of precedence (`loading`), the numbers commands take that are
not settings (`command_flags`) and the embedding spec (`embedding`). It builds nothing: the
builder in mulligan/runs/ makes components from it."""
