"""Planner: legal SGLang configurations → predictions → frontier → the choice and its explanation. Pure."""
