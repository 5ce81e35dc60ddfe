#!/bin/sh
# Exercise 1, broken on purpose: an edge switch stopped, so its two hosts are cut off.
# The checker must fail `switches-running` and `pingall`.
set -eu
LAB=${LAB:-lab}
ofan-lab up --name "$LAB"
ofan-lab node e-p0-0 stop --name "$LAB"
