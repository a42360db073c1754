"""Flow-matching policies behind one protocol (`base.FlowPolicy`)."""
