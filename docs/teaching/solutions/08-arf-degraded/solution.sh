#!/bin/sh
# Exercise 8: the runs behind results/: one core link slowed to a quarter of the lab's rate,
# then an all-to-all under three algorithms on that lab. broken/ is the same comparison on a
# lab whose links all run at the same rate (the student forgot `link … rate`): the checker must
# fail `degraded-link`.
set -eu
LAB=${LAB:-lab}
ofan-lab up --name "$LAB" --buffer 2MB
ofan-lab link c-0 a-p0-0 rate 250kbit --name "$LAB"
ofan-lab compare --name "$LAB" --lb ecmp,arf-wcmp,ofan --collective all-to-all --sizes 16KB --repeat 1 --seed 8 --out "${OUT:-ex8}"
ofan-lab down --name "$LAB"
