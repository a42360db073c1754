"""Reporting: episode summaries and statistics, tables, paired comparisons, plots, and the HTML page."""
