"""Replaced by ``python -m gpuparam.train --task G1JoystickFlatTerrain-v1`` (docs/legged.md)."""

raise SystemExit(__doc__)
