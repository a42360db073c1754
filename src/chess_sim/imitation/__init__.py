"""Imitation training of flow policies on LeRobot datasets."""
