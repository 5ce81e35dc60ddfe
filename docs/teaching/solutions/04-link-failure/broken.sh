#!/bin/sh
# Exercise 4, broken on purpose: the interface taken down behind the lab's back (e-p0-0's p2
# faces a-p0-0). The lab does not know the link is down and recomputes nothing: the checker
# must fail `link-down`.
set -eu
LAB=${LAB:-lab}
ofan-lab up --name "$LAB"
ofan-lab exec e-p0-0 --name "$LAB" -- ip link set p2 down
