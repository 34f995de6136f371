"""Replaced by ``python -m gpuparam.train --task Go1JoystickFlatTerrain-v1`` (docs/legged.md)."""

raise SystemExit(__doc__)
