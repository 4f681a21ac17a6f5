"""How many Python files are in this directory? (read-only list tool)

Run with an endpoint configured (OPENAI_BASE_URL / OPENAI_API_KEY, MULLIGAN_MODEL):
    python examples/count_python_files.py
"""

import sys

from _run import run_example

if __name__ == "__main__":
    sys.exit(run_example("examples/count-python-files"))
