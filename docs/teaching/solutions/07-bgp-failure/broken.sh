#!/bin/sh
# Exercise 7, broken on purpose: the same failure in a statically routed lab. Its routes are
# right (the lab recomputed them), but no routing protocol found them: the checker must fail
# `routing`.
set -eu
LAB=${LAB:-lab}
ofan-lab up --name "$LAB"
ofan-lab link a-p0-0 c-0 down --name "$LAB"
