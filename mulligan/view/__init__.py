"""`mulligan view`: a read-only web viewer over a memory's episode log, served on 127.0.0.1
(`app`) or written as a static bundle (`bundle`); both render the same pages (`pages`)."""
