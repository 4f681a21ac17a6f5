"""Which is hotter, Beijing or Shanghai, and by how much? (both weather calls in one turn)

Run with an endpoint configured (OPENAI_BASE_URL / OPENAI_API_KEY, MULLIGAN_MODEL):
    python examples/weather.py
"""

import sys

from _run import run_example

if __name__ == "__main__":
    sys.exit(run_example("examples/weather"))
