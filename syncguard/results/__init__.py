"""Results: the streamed JSON Lines format and its reader, the machine record, statistics over
rounds, the DataFrames every report is built on. See docs/architecture.md."""
