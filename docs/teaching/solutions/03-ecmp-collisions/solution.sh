#!/bin/sh
# Exercise 3: the runs behind results/ (a lab built for the run and removed afterwards).
# broken/ is the same file with only the ECMP runs: the checker must fail `runs-present`.
set -eu
ofan-lab compare --name "${LAB:-lab}" --lb ecmp,ofan --sizes 256KB --repeat 2 --seed 3 --out "${OUT:-ex3}"
