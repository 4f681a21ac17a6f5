"""The report, read from the episode log alone: statistics, tables, plots, the headline, and
the transfer and selection sections."""
