#!/bin/sh
# Exercise 7, correct: a BGP fabric (FRR), one aggregation-core link down; `link` waits until
# BGP has reconverged and says how long it took.
set -eu
LAB=${LAB:-lab}
ofan-lab up --name "$LAB" --routing bgp
ofan-lab link a-p0-0 c-0 down --name "$LAB"
