"""`python -m sidecar` runs the command line."""

from sidecar.cli import main

main()
