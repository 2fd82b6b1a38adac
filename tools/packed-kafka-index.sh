#!/bin/sh
# kafka-index from the packed env of `make package-full`, with no activation and any PATH (a fleet's SSH
# command runs it so): the env's own python, whose pyvenv.cfg beside it selects the env's site-packages.
exec "$(dirname "$0")/python" -m jobs.cli "$@"
