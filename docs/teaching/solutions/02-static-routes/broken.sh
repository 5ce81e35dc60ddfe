#!/bin/sh
# Exercise 2, broken on purpose: the same routes with one uplink each instead of all of them.
# Every host still reaches every other, but half the fabric carries nothing: the checker must
# fail `routes-match-plan` (and pass `pingall`).
set -eu
LAB=${LAB:-lab}
ofan-lab up --name "$LAB" --routing none
python3 "$(dirname "$0")/routes.py" "$LAB" --one-uplink
