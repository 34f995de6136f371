"""Training apps: ``python -m gpuparam.train`` / ``python -m gpuparam.play`` (rsl_rl's PPO on
every legged task and Gymnasium robot; docs/legged.md)."""
