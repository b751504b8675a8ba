"""Reconcile: from a parsed target, a plan and the observed children to the desired objects and status. Pure."""
