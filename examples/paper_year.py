"""Verify the year of the fictional paper ExampleAgent in a small local library.

Run with an endpoint configured (OPENAI_BASE_URL / OPENAI_API_KEY, MULLIGAN_MODEL):
    python examples/paper_year.py
"""

import sys

from _run import run_example

if __name__ == "__main__":
    sys.exit(run_example("examples/paper-year"))
