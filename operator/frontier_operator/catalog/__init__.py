"""Pure data about models, GPUs and number formats, loaded into frozen dataclasses."""
