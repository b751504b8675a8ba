"""Fixtures of the operator's end-to-end tests: the CRD registered once, a fast re-check, no metrics port."""

from operator_support import crd, fast_operator

__all__ = ["crd", "fast_operator"]
