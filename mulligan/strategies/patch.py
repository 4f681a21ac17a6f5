from mulligan.strategies.base import Option, Strategy

DIVERSE = Option(
    "diverse",
    "draws",
    "its candidates drawn across the temperature ladder ([loop] temperatures)",
    {"ladder": "spread"},
)
PATCH = Strategy(
    "patch",
    "solve's repair pipeline, not the agent loop: localise from the failing check, show the "
    "implicated functions, ask for search/replace edits, refuse one that does not apply or "
    "parse, run the checks on N candidates and select by them (Agentless, aider)",
    in_default_study=False,
    outside_loop=True,
    options=(DIVERSE,),
)
AUTO = "auto"
"""solve's default: `patch` when the failing checks name failing tests or a traceback into the
project, else the agent loop's AGENT_DEFAULT."""
AGENT_DEFAULT = "reflexion-memory"
