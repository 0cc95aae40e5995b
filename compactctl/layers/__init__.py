"""The layers: each plans events to append to a session (rules, dedup, micro, summary, tiers)."""
