"""Tuning: observation + applied configuration + calibrated model → calibration and the next action. Pure."""
