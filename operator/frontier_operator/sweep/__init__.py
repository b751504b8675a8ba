"""Sweeps: measure a few candidate configurations with SGLang's benchmark client before (or while) serving,
where the model is least sure and the decision closest, and feed the measurements back into the plan (pure)."""
