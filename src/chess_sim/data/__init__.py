"""Demonstration data: expert episodes recorded as LeRobot datasets."""
