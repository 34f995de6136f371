"""``python -m gpuparam.train``: see ``gpuparam.apps.train`` and docs/legged.md."""

from gpuparam.apps.train import main

if __name__ == "__main__":
    main()
