"""Write mulligan/cli/flag_table.json again from the settings' fields (after a setting or a
command number changed): the parser reads the flags from it without loading pydantic."""

from __future__ import annotations

from mulligan.cli.setting_flags import TABLE, flag_table_text

if __name__ == "__main__":
    TABLE.write_text(flag_table_text(), encoding="utf-8")
    print(f"wrote {TABLE}")
