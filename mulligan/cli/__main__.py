from mulligan.cli import entry

entry()
