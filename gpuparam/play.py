"""``python -m gpuparam.play``: see ``gpuparam.apps.play`` and docs/legged.md."""

from gpuparam.apps.play import main

if __name__ == "__main__":
    main()
