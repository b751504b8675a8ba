"""Fixtures of the hardening tests: the operator's CRD registered once, a fast re-check, no metrics port."""

from operator_support import crd, fast_operator

__all__ = ["crd", "fast_operator"]
