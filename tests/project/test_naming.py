"""The naming habit of the settings types, checked on the run configuration: a table of the
settings file is a `<Table>Section` named after its key (`[budget]` is `BudgetSection`); what a
component is built with is a `<Component>Settings` (`ActorSettings`, `LoopSettings`)."""

from __future__ import annotations

from mulligan.settings.run_config import RunConfig, Section


def section_name(table: str) -> str:
    return "".join(word.title() for word in table.split("_")) + "Section"


def test_every_table_of_the_settings_file_is_a_section_named_after_it() -> None:
    misnamed = {}
    for table, field in RunConfig.model_fields.items():
        kind = field.annotation
        assert isinstance(kind, type) and issubclass(kind, Section), table
        if kind.__name__ != section_name(table):
            misnamed[table] = f"{kind.__name__}, not {section_name(table)}"
    assert not misnamed, misnamed
