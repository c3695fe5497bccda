"""A realistic live workload, so a newcomer has something to watch in the dashboard."""
