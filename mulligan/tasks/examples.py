"""The seed scenarios: small tasks with their own tools and checks."""

from __future__ import annotations

from mulligan.actor.tools import Tool, tool
from mulligan.schema import ContainsCheck, ExactMatchCheck, NumericCheck, Task

HIGHS_C = {"beijing": 31.0, "shanghai": 28.5, "guangzhou": 33.0, "harbin": 22.0}


@tool
def weather(city: str) -> str:
    """Use to get today's forecast high temperature (Celsius) for a city."""
    high = HIGHS_C.get(city.strip().lower())
    if high is None:
        raise ValueError(f"no forecast for {city!r}; known cities: {', '.join(HIGHS_C)}")
    return f'{{"city": "{city}", "high_c": {high}}}'


EXAMPLE_TOOLS: list[Tool] = [weather]

LIBRARY = {
    "ExampleAgent (software library)": (
        "ExampleAgent is an open-source software library for building chat agents. "
        "Its first release was in 2019. It is not to be confused with the paper "
        "'ExampleAgent: Learning from Mistakes' listed separately."
    ),
    "ExampleAgent: Learning from Mistakes": (
        "ExampleAgent: Learning from Mistakes is a fictional paper about agents that reflect. "
        "It was published in 2022 by J. Doe and R. Roe. It introduced lesson memories."
    ),
    "Reflexion": "Reflexion is a paper on verbal reinforcement learning. It was published in 2023.",
    "ReAct": "ReAct is a paper that interleaves reasoning and acting. It was published in 2022.",
}

WORKSPACE = {
    "main.py": "print('hello')\n",
    "util/helpers.py": "def helper():\n    return 1\n",
    "util/__init__.py": "",
    "README.md": "# demo\n",
    "data/notes.txt": "not python\n",
    "data/script.py.bak": "old\n",
}

TASKS = [
    Task(
        id="examples/weather",
        family="examples",
        prompt="Which is hotter today, Beijing or Shanghai, and by how much (in degrees Celsius)?",
        tools=["weather", "calculator"],
        checks=[
            ContainsCheck(text="Beijing", name="names the hotter city"),
            NumericCheck(value=2.5, abs_tol=0.05, name="difference", visibility="hidden"),
        ],
    ),
    Task(
        id="examples/count-python-files",
        family="examples",
        prompt="How many Python files (.py) are in this directory, subdirectories included?",
        tools=["list_files"],
        workspace=WORKSPACE,
        checks=[NumericCheck(value=3, name="count")],
    ),
    Task(
        id="examples/paper-year",
        family="examples",
        prompt="In which year was the paper ExampleAgent published? Verify it in the library.",
        tools=["search", "lookup"],
        documents=LIBRARY,
        checks=[ExactMatchCheck(answer="2022", name="year")],
    ),
]
