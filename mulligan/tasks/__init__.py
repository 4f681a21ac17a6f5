"""Task files, loaders and built-in suites."""
