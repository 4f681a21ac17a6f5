"""A stand-in for llama-cpp-python in the local-server lifecycle tests (never installed)."""
