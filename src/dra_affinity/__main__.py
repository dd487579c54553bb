"""``python -m dra_affinity`` runs the CLI."""

from dra_affinity.cli import main

if __name__ == "__main__":
    main()
