"""The digital twin of an SGLang fleet (shell side: it may import anything; its core is pure and seeded).

Start with `FleetSimulation` (`sim.fleet`): a fleet of simulated SGLang servers on a simulated clock, driven
by `advance(seconds)`, changed by `apply(change)` (`sim.changes`), read by `observe(fleet, window_s)`
(`sim.observe`), served over HTTP by `TwinExporter` / `LiveTwin` (`sim.exporter`). Its ground truth is a
`Truth` (`sim.truth`): a perturbed model or a measured table. `sim.bench` answers SGLang benchmark runs and
`sim.oracle` finds the cheapest configuration the truth allows. See docs/digital-twin.md.
"""
